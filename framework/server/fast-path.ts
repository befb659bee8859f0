import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { ApiDefinition } from '../service/definition.js'
import type { AccessLog } from './access-log.js'
import { errorAnswer } from './error-response.js'
import { nodeExchange, type Answer } from './exchange.js'
import type { Lifecycle } from './lifecycle.js'
import type { ServerMetrics } from './metrics.js'
import type { RequestPipeline } from './pipeline.js'
import { SANE_REQUEST_ID } from './request.js'
import { nodeSink, StreamAnswer } from './streaming.js'

export interface FastPathOptions {
  apis: readonly ApiDefinition[]
  pipeline: RequestPipeline
  lifecycle: Lifecycle
  metrics: ServerMetrics
  log: Logger
  checkKey: ((authorization: string | undefined) => void) | undefined
  /** The access line, when access logging is on. */
  logAccess: AccessLog | undefined
}

/** One fast-path exchange, as its answer is written and logged. */
interface Exchange {
  req: IncomingMessage
  res: ServerResponse
  path: string
  started: number
  requestId: string
  o: FastPathOptions
}

const elapsed = (x: Exchange) => Math.round((performance.now() - x.started) * 100) / 100

/** A whole answer: one write of head and body, then its access line. */
function writeWhole(x: Exchange, answer: Answer): void {
  const { req, res, o } = x
  try {
    if (!res.destroyed) {
      const headers = answer.headers
      // A length, not chunked encoding: one write of headers and body, as hono's answers.
      headers['content-length'] = String(
        typeof answer.body === 'string' ? Buffer.byteLength(answer.body) : (answer.body as Uint8Array).byteLength,
      )
      // Answered with an error before its body has all arrived (an early refusal, 413,
      // 415): close rather than read the rest only to throw it away, as node would to
      // keep the connection.
      if (o.lifecycle.phase === 'draining' || (answer.status >= 400 && !req.complete)) headers.connection = 'close'
      res.writeHead(answer.status, headers)
      res.end(answer.body as string | Uint8Array)
    }
    o.logAccess?.('POST', x.path, answer.status, elapsed(x), x.requestId, answer.trace)
  } catch (err) {
    o.log.error({ err, requestId: x.requestId }, 'could not write the response')
    res.destroy()
  }
}

/** An io.stream answer: the head at once (chunked), then each item as it comes; logged at its end. */
function writeStream(x: Exchange, answer: Answer, body: StreamAnswer): void {
  const { res, o } = x
  if (!res.destroyed) {
    if (o.lifecycle.phase === 'draining') answer.headers.connection = 'close'
    res.writeHead(answer.status, answer.headers)
    res.flushHeaders()
  }
  void body.pump(nodeSink(res, () => body.cancel()))
  void body.finished.then((status) => o.logAccess?.('POST', x.path, status, elapsed(x), x.requestId, answer.trace))
}

/**
 * serve()'s fast path: API routes straight from node's HTTP server, with what the hono
 * middleware does for them (request id, API key, draining, access log). Returns false for any
 * other request, which hono then answers.
 */
export function fastPath(o: FastPathOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { pipeline, metrics, log, checkKey } = o
  const routes = new Map(o.apis.filter((a) => !a.task).map((a) => [a.route, a]))
  return (req, res) => {
    if (req.method !== 'POST') return false
    const url = req.url ?? ''
    const q = url.indexOf('?')
    const path = q === -1 ? url : url.slice(0, q)
    const a = routes.get(path)
    if (a === undefined) return false
    const started = performance.now()
    const given = req.headers['x-request-id']
    const requestId = typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID()
    const ex = nodeExchange(req, res)
    const x: Exchange = { req, res, path, started, requestId, o }
    const write = (answer: Answer): void =>
      answer.body instanceof StreamAnswer ? writeStream(x, answer, answer.body) : writeWhole(x, answer)
    if (checkKey) {
      try {
        checkKey(ex.header('authorization'))
      } catch (err) {
        const m = metrics.endpoint(a.name)
        m.begin()
        m.end(401, 0)
        write(errorAnswer(err, requestId, log))
        return true
      }
    }
    pipeline.handle(ex, a, requestId, write).catch((err: unknown) => {
      // handle() answers every error itself; this is only for a bug in it, never a hang.
      log.error({ err, requestId }, 'request pipeline failed')
      res.destroy()
    })
    return true
  }
}
