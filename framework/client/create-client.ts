import { BundleError, CATALOG, RETRYABLE_CODES, type ErrorCode } from '../../errors/index.js'
import { parseTensorJson } from '../io/lenient-json.js'
import { streamItems } from './sse.js'

type AnyFn = (...args: any[]) => any

/** What a call resolves to: the output, or for a streaming API (io.stream) the items as they come. */
export type ClientOutput<R> = Awaited<R> extends AsyncIterable<infer T> ? AsyncIterable<T> : Awaited<R>

/**
 * The client's methods: every instance method of the service class, input → Promise<output>
 * (a streaming API's promise resolves to an AsyncIterable of its items once the answer starts).
 */
export type ServiceClient<C extends abstract new (...args: any) => any> = {
  [K in keyof InstanceType<C> as InstanceType<C>[K] extends AnyFn ? K : never]: InstanceType<C>[K] extends (
    input: infer I,
    ...rest: any[]
  ) => infer R
    ? (input: I, init?: { signal?: AbortSignal; headers?: Record<string, string> }) => Promise<ClientOutput<R>>
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

interface Operation {
  route: string
  requestTypes: string[]
  /** Answers with a stream of items (io.stream): asked for as Server-Sent Events. */
  streams: boolean
}

/**
 * A typed client for a running service. Routes and request media types come from the
 * server's /openapi.json (read once); inputs are sent as JSON, text, or raw bytes.
 * A non-2xx answer throws a BundleError carrying the server's code, message and details;
 * calls the server shed or was not ready for are first retried after its Retry-After (`retries`).
 *
 * @example
 * const client = createClient<typeof Greeter>('http://localhost:3000')
 * const { greeting } = await client.greet({ name: 'ada' })
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
        const doc = (await r.json()) as {
          paths: Record<
            string,
            {
              post?: {
                operationId?: string
                requestBody?: { content?: Record<string, unknown> }
                responses?: Record<string, { content?: Record<string, unknown> }>
              }
            }
          >
        }
        const map = new Map<string, Operation>()
        for (const [route, item] of Object.entries(doc.paths)) {
          if (item.post?.operationId)
            map.set(item.post.operationId, {
              route,
              requestTypes: Object.keys(item.post.requestBody?.content ?? {}),
              streams: Object.hasOwn(item.post.responses?.['200']?.content ?? {}, 'text/event-stream'),
            })
        }
        return map
      })
      .catch((err) => {
        operations = undefined // not cached: the next call tries again (the server may be starting)
        throw err
      }))

  async function call(
    name: string,
    input: unknown,
    init: { signal?: AbortSignal; headers?: Record<string, string> } = {},
  ): Promise<unknown> {
    const op = (await load()).get(name)
    if (op === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `the service at ${base} has no API named ${name}`)
    let body: string | Uint8Array<ArrayBuffer>
    let contentType: string
    if (op.requestTypes.includes('application/json')) {
      const tensorLike =
        input !== null && typeof input === 'object' && ArrayBuffer.isView((input as { data?: unknown }).data)
      body = JSON.stringify(
        tensorLike
          ? { ...(input as object), data: Array.from((input as { data: ArrayLike<number | bigint> }).data, Number) }
          : input,
      )
      contentType = 'application/json'
    } else if (op.requestTypes.includes('text/plain')) {
      body = String(input)
      contentType = 'text/plain; charset=utf-8'
    } else if (input instanceof Uint8Array || (input as { bytes?: unknown })?.bytes instanceof Uint8Array) {
      const declared = op.requestTypes.find((t) => !t.includes('*')) ?? 'application/octet-stream'
      const file =
        input instanceof Uint8Array
          ? { bytes: input, mediaType: declared }
          : (input as { bytes: Uint8Array; mediaType?: string })
      body = file.bytes as Uint8Array<ArrayBuffer>
      contentType = file.mediaType ?? declared
    } else {
      throw new BundleError(
        'E_INPUT_INVALID',
        `${name} takes ${op.requestTypes.join(', ')}; pass { bytes, mediaType } for binary inputs`,
      )
    }
    // Header names are case-insensitive: merge on lower case so a caller's Content-Type replaces ours.
    const headers: Record<string, string> = { 'content-type': contentType }
    for (const [k, v] of Object.entries({ ...options.headers, ...init.headers })) headers[k.toLowerCase()] = v
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`
    if (op.streams) headers.accept = 'text/event-stream'
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
        // Tensor answers may hold NaN/Infinity tokens and integers past 2^53 (exact as BigInts).
        if (type.includes('json')) return parseTensorJson(await res.text())
        if (type.startsWith('text/')) return res.text()
        return { bytes: new Uint8Array(await res.arrayBuffer()), mediaType: type }
      }
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
        ? (input: unknown, init?: { signal?: AbortSignal; headers?: Record<string, string> }) => call(prop, input, init)
        : undefined,
  })
}
