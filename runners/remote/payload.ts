import { deserialize, serialize } from 'node:v8'
import { BundleError, type WireError } from '../../errors/index.js'
import type { TraceCarrier } from '../tracing/index.js'
import type { RedisLink } from './link.js'

// A runner call as it travels between an API server and a remote worker: Node's structured
// serialization (typed arrays as raw bytes, never JSON number arrays). Small payloads ride in
// the BullMQ job as base64; large ones go into a Redis key of their own as raw bytes, read and
// deleted by the one who takes them, which spares base64 and JSON on megabytes of tensors.
// API servers and workers of one bundle run the same Node version, which this format needs.

/** Payloads from this size travel in their own key. */
const INLINE_MAX = 64 * 1024

/** Inline base64, or the key that holds the bytes. */
export type Packed = { b64: string } | { ref: string }

/** What a job carries: the call, and when its requests stop waiting (epoch ms). */
export interface JobData {
  method: string
  args: Packed
  /** On Redis's clock (RedisLink.now), which API servers and workers share. */
  deadline: number
  /** The model the API server serves (content digest): a worker running another refuses the batch. */
  digest?: string
  /** The traced requests in the batch (W3C trace context): the worker's spans join their traces. */
  trace?: TraceCarrier[]
}

/**
 * How a worker marks a job it failed for a transport reason (BullMQ retries it; the last
 * attempt's failed reason starts with this), so the API server answers 503, never 500.
 */
export const TRANSPORT_FAILURE = 'E_REMOTE_UNAVAILABLE'

/** What a worker answers: the serialized result, or an error with its catalog code. */
export type JobResult = { ok: Packed } | { error: WireError; stale?: boolean }

/**
 * A Redis call of pack/unpack that failed: the connection, not the data. Thrown as
 * E_REMOTE_UNAVAILABLE, so a worker hands the batch to another worker instead of answering
 * with an error, and a client gets a retryable 503 instead of a 500.
 */
function transport(err: unknown, what: string): BundleError {
  return new BundleError('E_REMOTE_UNAVAILABLE', `Redis failed while ${what}; retry shortly`, { cause: err })
}

/** Whether an error from pack/unpack (or a Redis call like them) was the connection failing. */
export const isTransportError = (err: unknown): boolean =>
  (err as { code?: unknown } | undefined)?.code === 'E_REMOTE_UNAVAILABLE'

/**
 * An ioredis error that says the connection failed, not the command: closed, not writable while
 * reconnecting, or out of retries. Callers answer it as E_REMOTE_UNAVAILABLE (a retryable 503).
 */
export const isConnectionError = (err: unknown): boolean => {
  const e = err as { name?: unknown; message?: unknown } | undefined
  return (
    e?.name === 'MaxRetriesPerRequestError' ||
    /^(Connection is closed|Stream isn't writeable)/.test(String(e?.message ?? ''))
  )
}

export async function pack(link: RedisLink, key: string, value: unknown, ttlMs: number): Promise<Packed> {
  const bytes = serialize(value)
  if (bytes.byteLength < INLINE_MAX) return { b64: bytes.toString('base64') }
  try {
    await link.client().set(key, bytes, 'PX', Math.max(1_000, Math.ceil(ttlMs)))
  } catch (err) {
    throw transport(err, 'storing a payload')
  }
  return { ref: key }
}

/**
 * `consume`: delete the key once read (results: one reader). Batch payloads stay until their
 * sender deletes them, since a batch whose worker died is read again by the next worker.
 */
export async function unpack(link: RedisLink, p: Packed, consume: boolean): Promise<unknown> {
  let bytes: Buffer | null
  if ('b64' in p) bytes = Buffer.from(p.b64, 'base64')
  else {
    try {
      bytes = consume ? await link.client().getdelBuffer(p.ref) : await link.client().getBuffer(p.ref)
    } catch (err) {
      throw transport(err, 'reading a payload')
    }
    if (bytes === null)
      throw new BundleError('E_RUNNER_TIMEOUT', 'the batch payload expired in Redis before it was read')
  }
  try {
    return deserialize(bytes)
  } catch (err) {
    throw new BundleError(
      'E_INTERNAL',
      `a remote runner payload could not be read (API servers and workers must run the same Node.js version): ` +
        `${(err as Error).message}`,
    )
  }
}
