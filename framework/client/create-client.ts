import { BundleError, CATALOG, RETRYABLE_CODES, type ErrorCode } from '../../errors/index.js'
import { streamItems } from './sse.js'
import { decodeAnswer, encodeInput, operationOf, type OpenApiPost, type Operation } from './wire.js'
import type { ClientInput, ClientValue } from './wire-types.js'

type IsAny<T> = 0 extends 1 & T ? true : false

/**
 * What a call resolves to: the output in its wire form (see {@link ClientValue}), or for a
 * streaming API (io.stream) the items as they come.
 */
export type ClientOutput<R> = Awaited<R> extends AsyncIterable<infer T> ? AsyncIterable<T> : ClientValue<Awaited<R>>

/** Per-call options. */
export interface CallInit {
  signal?: AbortSignal
  headers?: Record<string, string>
}

/** A method the client can call: not one whose input is a stream (io.stream inputs are WebSocket routes). */
type Callable<M, K> = M extends (input: infer I, ...rest: any[]) => any
  ? IsAny<I> extends true
    ? K
    : [I] extends [AsyncIterable<unknown>]
      ? never
      : K
  : never

/**
 * The client's methods: every instance method of the service class, input → Promise<output>,
 * with binary and tensor inputs and outputs in their wire forms ({@link ClientInput},
 * {@link ClientValue}). A streaming API's promise resolves to an AsyncIterable of its items once
 * the answer starts.
 */
export type ServiceClient<C extends abstract new (...args: any) => any> = {
  [K in keyof InstanceType<C> as Callable<InstanceType<C>[K], K>]: InstanceType<C>[K] extends (
    input: infer I,
    ...rest: any[]
  ) => infer R
    ? (input: ClientInput<I>, init?: CallInit) => Promise<ClientOutput<R>>
    : never
}

export interface ClientOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  apiKey?: string
  headers?: Record<string, string>
  fetch?: typeof fetch
  /**
   * How many times a call the server did not run — shed (503 E_RUNNER_OVERLOADED), over its
   * concurrency limit (429), not ready, no worker — is sent again, after the server's
   * Retry-After (up to 1.5× longer, at most `maxRetryWaitMs`). Default 2; 0 turns it off. Other
   * errors are never retried. The refusing runner never ran the request, but in a service that
   * calls several runners an earlier one may have: use 0 for APIs with side effects.
   */
  retries?: number
  /** Longest wait before a retry, in ms (default 5000). */
  maxRetryWaitMs?: number
}

/** Milliseconds a Retry-After header asks for (seconds or an HTTP date); 1 s when absent or odd. */
function retryAfterMs(header: string | null): number {
  if (header === null) return 1000
  const seconds = Number(header)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
  const at = Date.parse(header)
  return Number.isNaN(at) ? 1000 : Math.max(0, at - Date.now())
}

/** Waits `ms`, or rejects when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => (signal?.removeEventListener('abort', onAbort), resolve()), ms)
    const onAbort = () => (clearTimeout(timer), reject(signal!.reason))
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * A typed client for a running service. Routes and request media types come from the
 * server's /openapi.json (read once). Inputs go in their wire forms: JSON and text as such,
 * images, files and bytes as `{ bytes, mediaType }`, a Uint8Array or a Blob, tensors with
 * typed-array data as raw bytes (or JSON values), a multipart input as an object of its parts.
 * Binary answers come back as `{ bytes, mediaType, filename? }`, tensors with typed-array data.
 * A non-2xx answer throws a BundleError carrying the server's code, message and details;
 * calls the server shed or was not ready for are first retried after its Retry-After (`retries`).
 *
 * @example
 * const client = createClient<typeof Greeter>('http://localhost:3000')
 * const { greeting } = await client.greet({ name: 'ada' })
 * const { angle } = await client.classify({ bytes: readFileSync('line.png'), mediaType: 'image/png' })
 */
export function createClient<C extends abstract new (...args: any) => any>(
  baseUrl: string,
  options: ClientOptions = {},
): ServiceClient<C> {
  const doFetch = options.fetch ?? fetch
  const base = baseUrl.replace(/\/+$/, '')
  let operations: Promise<Map<string, Operation>> | undefined
  const reach = async (url: string, init?: RequestInit): Promise<Response> => {
    try {
      return await doFetch(url, init)
    } catch (cause) {
      if ((cause as Error)?.name === 'AbortError') throw cause
      throw new BundleError(
        'E_CLIENT_CONNECTION',
        `cannot reach ${base}: ${(cause as { cause?: Error }).cause?.message ?? (cause as Error).message}`,
        { cause },
      )
    }
  }
  const load = (): Promise<Map<string, Operation>> =>
    (operations ??= reach(`${base}/openapi.json`)
      .then(async (r) => {
        if (!r.ok)
          throw new BundleError(
            'E_HTTP_NOT_FOUND',
            `${base}/openapi.json answered ${r.status}; is this a modelbundle server?`,
          )
        const doc = (await r.json()) as { paths: Record<string, { post?: OpenApiPost }> }
        const map = new Map<string, Operation>()
        for (const [route, item] of Object.entries(doc.paths))
          if (item.post?.operationId) map.set(item.post.operationId, operationOf(route, item.post))
        return map
      })
      .catch((err) => {
        operations = undefined // not cached: the next call tries again (the server may be starting)
        throw err
      }))

  async function call(name: string, input: unknown, init: CallInit = {}): Promise<unknown> {
    const op = (await load()).get(name)
    if (op === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `the service at ${base} has no API named ${name}`)
    const { body, headers: own } = encodeInput(name, op, input)
    // Header names are case-insensitive: merge on lower case so a caller's Content-Type replaces ours.
    const headers: Record<string, string> = { ...own }
    for (const [k, v] of Object.entries({ ...options.headers, ...init.headers })) headers[k.toLowerCase()] = v
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`
    if (op.streams) headers.accept = 'text/event-stream'
    // Tensors come back as raw bytes: exact, and no JSON to parse.
    else if (op.tensorOut) headers.accept = 'application/octet-stream'
    const retries = options.retries ?? 2
    for (let attempt = 0; ; attempt++) {
      const res = await reach(`${base}${op.route}`, {
        method: 'POST',
        headers,
        body,
        ...(init.signal ? { signal: init.signal } : {}),
      })
      const type = res.headers.get('content-type') ?? ''
      if (res.ok) {
        if (op.streams && type.startsWith('text/event-stream') && res.body) return streamItems(res.body, op.route)
        return decodeAnswer(res, op)
      }
      // A body that is not JSON (a proxy's page) is no payload: the error below still names the status.
      const payload = type.includes('json')
        ? ((await res.json().catch(() => undefined)) as
            | { error?: { code?: string; message?: string; details?: unknown } }
            | undefined)
        : undefined
      const code = payload?.error?.code
      const known = code !== undefined && Object.hasOwn(CATALOG, code) ? (code as ErrorCode) : 'E_INTERNAL'
      if (attempt < retries && RETRYABLE_CODES.has(known)) {
        // Never sooner than asked; up to 1.5× later, so clients shed together do not all come back at once.
        await pause(
          Math.min(
            retryAfterMs(res.headers.get('retry-after')) * (1 + Math.random() / 2),
            options.maxRetryWaitMs ?? 5000,
          ),
          init.signal,
        )
        continue
      }
      throw new BundleError(known, payload?.error?.message ?? `${op.route} answered HTTP ${res.status}`, {
        details: payload?.error?.details,
      })
    }
  }

  return new Proxy({} as ServiceClient<C>, {
    get: (_target, prop) =>
      typeof prop === 'string' && prop !== 'then'
        ? (input: unknown, init?: CallInit) => call(prop, input, init)
        : undefined,
  })
}
