import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Context } from 'hono'
import { BundleError } from '../../errors/index.js'
import type { HeaderReader, RequestBody } from '../io/types.js'
import { readBody } from './body.js'
import { headerOf } from './request.js'
import type { StreamAnswer } from './streaming.js'

/**
 * One API request as the pipeline sees it, whichever way it came in: through hono (every
 * route, and `app.request()` in tests) or straight from node's HTTP server (serve()'s fast path
 * for API routes, which skips building web Request/Response objects — on a small JSON call
 * those cost more than validating, running and logging it together; see bench:served).
 */
export interface Exchange {
  /** A request header; `name` in lower case. */
  header(name: string): string | undefined
  /** The body's bytes, at most `max` of them (E_HTTP_PAYLOAD_TOO_LARGE past that). */
  body(max: number): Promise<Uint8Array>
  /** node's response, when there is a socket: the API method's context watches it to see the client go. */
  readonly outgoing: ServerResponse | undefined
}

/** What the pipeline answers: written by hono as a Response, or by the fast path as it is. */
export interface Answer {
  status: number
  headers: Record<string, string>
  /** A StreamAnswer (io.stream): the writer pumps its chunks to the client as they come. */
  body: string | Uint8Array | StreamAnswer
  /** The request's server span, when traced: its access-log line names it. */
  trace?: { traceId: string; spanId: string }
  /** An error answer's code and message (as the client reads them): its span records them. */
  error?: { code: string; message: string }
}

/** An exchange's headers as descriptors and API methods read them (any case). */
export class ExchangeHeaders implements HeaderReader {
  constructor(private readonly ex: Exchange) {}
  get(name: string): string | null {
    return this.ex.header(name.toLowerCase()) ?? null
  }
}

/** A body already read: classes, not closures per request (they keep the request's scope alive past young GC). */
export class BodyOf implements RequestBody {
  constructor(
    readonly contentType: string,
    readonly headers: HeaderReader,
    readonly raw: Uint8Array,
  ) {}
  bytes(): Promise<Uint8Array> {
    return Promise.resolve(this.raw)
  }
  formData(): Promise<FormData> {
    return new Response(this.raw as Uint8Array<ArrayBuffer>, {
      headers: { 'content-type': this.contentType },
    }).formData()
  }
}

export function honoExchange(c: Context): Exchange {
  return {
    header: (name) => headerOf(c, name),
    body: (max) =>
      readBody(
        headerOf(c, 'content-length'),
        () => c.req.arrayBuffer(),
        () => c.req.raw.body,
        max,
      ),
    outgoing: (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing,
  }
}

const tooLarge = (max: number) =>
  new BundleError('E_HTTP_PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`)

/** The body of a node request, cut off as soon as it passes `max` (the answer then closes the connection). */
export function readNodeBody(req: IncomingMessage, max: number): Promise<Uint8Array> {
  const length = req.headers['content-length']
  if (length !== undefined && Number(length) > max) return Promise.reject(tooLarge(max))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength
      if (size > max) {
        done()
        // The rest is not read: the error answer closes the connection.
        reject(tooLarge(max))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => {
      done()
      resolve(chunks.length === 1 ? chunks[0]! : chunks.length === 0 ? new Uint8Array(0) : Buffer.concat(chunks, size))
    }
    const onError = (err: Error) => {
      done()
      reject(err)
    }
    const onClose = () => {
      // Closed before the end of the body: the client went away.
      if (!req.complete) onError(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))
    }
    const done = () => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
    }
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
  })
}

/** An exchange straight from node's HTTP server (a class: no closures per request). */
class NodeExchange implements Exchange {
  constructor(
    private readonly req: IncomingMessage,
    readonly outgoing: ServerResponse,
  ) {}
  header(name: string): string | undefined {
    const v = this.req.headers[name]
    return Array.isArray(v) ? v.join(', ') : v
  }
  body(max: number): Promise<Uint8Array> {
    return readNodeBody(this.req, max)
  }
}

export function nodeExchange(req: IncomingMessage, res: ServerResponse): Exchange {
  return new NodeExchange(req, res)
}
