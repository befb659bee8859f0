import { randomUUID } from 'node:crypto'
import type { Context } from 'hono'
import { BundleError } from '../../errors/index.js'
import { route, type RouteSpec } from '../route-spec.js'
import type { AppParts, ServerHono } from './app-parts.js'
import type { Protocol } from './app.js'
import { corsMiddleware } from './cors.js'
import { errorResponse } from './error-response.js'
import { ExchangeHeaders, honoExchange, type Answer } from './exchange.js'
import { infraPart } from './infra.js'
import { bind, type RouteIndex, type ServerPart } from './part.js'
import { frameworkVersion, headerOf, SANE_REQUEST_ID } from './request.js'
import { readableOf, StreamAnswer } from './streaming.js'
import { taskPart } from './tasks/routes.js'
import { isWebSocketApi } from './websocket/routes.js'
import { v2Part } from './v2/routes.js'

// What createServiceApp (app.ts) puts on the app, in order: request ids and the access log, CORS
// and the API key, the parts (operational routes, /v2, tasks, WebSocket routes, the service's
// APIs), and the answers for what no part serves.

/** Every request gets an id (the client's, if sane), an access-log line, and Connection: close while draining. */
export function requestIds(app: ServerHono, p: AppParts): void {
  app.use('*', async (c, next) => {
    const given = headerOf(c, 'x-request-id')
    const requestId = given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
    c.set('requestId', requestId)
    const started = performance.now()
    await next()
    // API responses and errors already carry the id in a plain header object (the fast path:
    // a Headers instance costs node-server a sort and a copy); other routes get it here.
    if (!c.get('headed')) c.res.headers.set('x-request-id', requestId)
    // While draining, tell keep-alive clients to reconnect (to another replica).
    if (p.lifecycle.phase === 'draining') c.res.headers.set('connection', 'close')
    p.logAccess?.(
      c.req.method,
      c.req.path,
      c.res.status,
      Math.round((performance.now() - started) * 100) / 100,
      requestId,
      c.get('trace'),
    )
  })
}

/**
 * CORS, then the API key: one check in front of every route, open only where the mounted parts
 * declare a route open, so a route added later is closed unless its part says otherwise.
 */
export function keyGate(
  app: ServerHono,
  p: AppParts,
  index: RouteIndex<RouteSpec>,
  parts: readonly ServerPart[],
): void {
  // CORS before the key check: a browser's preflight carries no Authorization header.
  const cors = corsMiddleware(p.options.corsOrigins ?? [])
  if (cors) app.use('*', cors)
  const checkKey = p.checkKey
  if (!checkKey) return
  const apiAt = new Map(p.definition.apis.filter((a) => !a.task).map((a) => [a.route, a]))
  app.use('*', async (c, next) => {
    const path = c.req.path
    if (!index.isOpen(path)) {
      try {
        checkKey(headerOf(c, 'authorization'))
      } catch (err) {
        const a = c.req.method === 'POST' ? apiAt.get(path) : undefined
        if (a) {
          // Refused calls still count in the endpoint's request metrics.
          const m = p.metrics.endpoint(a.name)
          m.begin()
          m.end(401, 0)
        }
        // In the shape of the part whose route it is (/v2 has its own).
        const at = index.at(path)[0]
        const answer = at && parts.find((part) => part.name === at.part)?.answer
        if (answer) return answer(c, err, {})
        throw err
      }
    }
    await next()
  })
}

/** What the Open Inference Protocol serves, over /v2 here and gRPC in serve(). */
export function protocolOf(p: AppParts): Protocol {
  return {
    repository: p.repository,
    ready: () => p.lifecycle.phase === 'ready' && p.lifecycle.notReady() === undefined,
    maxBodyBytes: p.maxBodyBytes,
    version: frameworkVersion(),
    log: p.log,
    track: (fn, lone) => p.pipeline.track(fn, lone),
    ...(p.checkKey ? { checkKey: p.checkKey } : {}),
  }
}

/** The parts a service app mounts: the operational routes, /v2, tasks (with Redis), WebSocket routes, its APIs. */
export function partsOf(p: AppParts, protocol: Protocol): ServerPart[] {
  const { lifecycle, pipeline, tasks, log } = p
  const parts = [infraPart(p), v2Part(protocol)]
  if (tasks)
    parts.push(
      taskPart(tasks, {
        decode: async (c, a) => {
          if (lifecycle.phase !== 'ready' || lifecycle.instance === undefined) throw lifecycle.notServing()
          const ex = honoExchange(c)
          return await pipeline.decodeInput(new ExchangeHeaders(ex), a, await pipeline.readInput(ex, a))
        },
        respond: (c, err) => errorResponse(err, c.get('requestId') ?? randomUUID(), log),
      }),
    )
  parts.push(p.sockets.part(), apiPart(p))
  return parts
}

/** Each API's POST route (a task API's are the task part's; a WebSocket API's the WebSocket part's). */
function apiPart(p: AppParts): ServerPart {
  const { pipeline } = p
  const apis = p.definition.apis.filter((a) => !a.task && !isWebSocketApi(a))
  const routes = apis.flatMap((a) =>
    bind([route('POST', a.route, 'keyed', 'api', a.name)], {
      [`POST ${a.route}`]: async (c) => {
        const answer = await new Promise<Answer>(
          (resolve, reject) => void pipeline.handle(honoExchange(c), a, c.get('requestId'), resolve).catch(reject),
        )
        // Plain header objects: a Headers instance costs node-server a sort and a copy.
        c.set('headed', true)
        if (answer.trace) c.set('trace', answer.trace)
        const body = answer.body instanceof StreamAnswer ? readableOf(answer.body) : answer.body
        return c.body(body as Uint8Array<ArrayBuffer> | string, answer.status as 200, answer.headers)
      },
    }),
  )
  return { name: 'api', routes }
}

/** An error as the server answers it, with extra headers (a 405's Allow). */
export function answerError(p: AppParts): (c: Context, err: unknown, headers: Record<string, string>) => Response {
  return (c, err, headers) => errorResponse(err, c.get('requestId') ?? randomUUID(), p.log, headers)
}

/** 404 where no part has the route, and every error in the one JSON shape. */
export function errorHandling(app: ServerHono, p: AppParts): void {
  app.notFound((c) =>
    errorResponse(
      new BundleError('E_HTTP_NOT_FOUND', `no route for ${c.req.method} ${c.req.path}`),
      c.get('requestId') ?? randomUUID(),
      p.log,
    ),
  )
  app.onError((err, c) => errorResponse(err, c.get('requestId') ?? randomUUID(), p.log))
}
