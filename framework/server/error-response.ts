import type { Logger } from 'pino'
import { BundleError, isBundleError, RETRYABLE_CODES, type ErrorCode } from '../../errors/index.js'
import type { Answer } from './exchange.js'

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: unknown; requestId: string }
}

// 5xx codes whose message is written for clients (no paths, no internals): shown as they are.
const CLIENT_SAFE_5XX: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'E_HTTP_NOT_READY',
  'E_HTTP_TIMEOUT',
  'E_RUNNER_OVERLOADED',
  'E_RUNNER_CRASHED',
  'E_RUNNER_TIMEOUT',
  'E_RUNNER_STOPPED',
  'E_RUNNER_NOT_DECLARED',
  'E_REMOTE_UNAVAILABLE',
  'E_REMOTE_NO_WORKERS',
  'E_REMOTE_MODEL_MISMATCH',
  'E_MODEL_OVER_BUDGET',
  'E_MODEL_LOAD_TIMEOUT',
])

// Absolute file paths and file:// URLs (two segments or more), and anything from a stack trace on.
const PATH = /(?<![\w.~-])(?:file:\/\/)?(?:\/[\w.@+~%-]+){2,}\/?/g
const STACK = /\n\s*at [\s\S]*$/

/**
 * A message with file paths and stack frames taken out, for text that reaches clients but may
 * quote a lower layer: a runner that could not start quotes onnxruntime, which names the file.
 */
export function redactPaths(message: string): string {
  return message.replace(STACK, '').replace(PATH, '<path>')
}

/** A client that hung up mid-request: not a server error, nothing to answer. */
export function isClientGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code
  return (
    code === 'ECONNRESET' ||
    code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    code === 'ECONNABORTED' ||
    (err as Error | null)?.message === 'aborted' ||
    (err as Error | null)?.name === 'AbortError'
  )
}

/**
 * What a client may see of an error. 4xx errors keep their code, message and details (they are
 * about the client's input). 5xx errors are logged in full and answered with a message written
 * for clients: the runners' and readiness codes as they are, E_OUTPUT_INVALID with its catalog
 * text, anything else as E_INTERNAL — stack traces, file paths and validation details of our
 * own output never reach a client (the client-safe codes' messages are stripped of paths too). The Open Inference
 * Protocol routes use it too.
 */
export function clientFacing(err: unknown, requestId: string, log: Logger): BundleError {
  if (isClientGone(err)) {
    log.info({ requestId }, 'client closed the connection before the response')
    return new BundleError('E_HTTP_CLIENT_CLOSED', 'the client closed the connection')
  }
  if (isBundleError(err) && err.status < 500) return err
  if (isBundleError(err) && CLIENT_SAFE_5XX.has(err.code)) {
    log.warn({ requestId, code: err.code, err: err.cause }, err.message)
    // The server's own E_HTTP_* messages name routes; the runners' may quote onnxruntime or a worker.
    const message = err.code.startsWith('E_HTTP_') ? err.message : redactPaths(err.message)
    return message === err.message ? err : new BundleError(err.code, message, { details: err.details })
  }
  if (isBundleError(err) && err.code === 'E_OUTPUT_INVALID') {
    log.error({ requestId, code: err.code, details: err.details }, err.message)
    return new BundleError(
      'E_OUTPUT_INVALID',
      'the API produced an output that does not match its schema; the server log has the details under this request id',
    )
  }
  log.error({ requestId, err }, isBundleError(err) ? err.message : 'unhandled error in request')
  return new BundleError('E_INTERNAL', 'internal server error; the server log has the details under this request id')
}

/**
 * Headers an error answer adds: the auth scheme on 401; Retry-After on the retryable ones; on
 * 413 the connection closes, so the server does not go on reading (and discarding) a body it has
 * already refused.
 */
export function errorHeaders(code: ErrorCode): Record<string, string> | undefined {
  if (code === 'E_HTTP_UNAUTHORIZED') return { 'www-authenticate': 'Bearer' }
  // Retrying at once turns shedding into more load (each refused request still costs its body and an answer).
  if (RETRYABLE_CODES.has(code)) return { 'retry-after': '1' }
  if (code === 'E_HTTP_PAYLOAD_TOO_LARGE' || code === 'E_INPUT_MULTIPART_LIMIT') return { connection: 'close' }
  return undefined
}

/** The one place an error becomes an HTTP answer (see clientFacing for what is shown). */
export function errorAnswer(
  err: unknown,
  requestId: string,
  log: Logger,
  extraHeaders: Record<string, string> = {},
): Answer {
  const e = clientFacing(err, requestId, log)
  const body: ErrorBody = {
    error: { code: e.code, message: e.message, ...(e.details === undefined ? {} : { details: e.details }), requestId },
  }
  return {
    status: e.status,
    headers: {
      'content-type': 'application/json',
      'x-request-id': requestId,
      ...extraHeaders,
      ...errorHeaders(e.code),
    },
    body: JSON.stringify(body),
    error: { code: e.code, message: e.message },
  }
}

/** errorAnswer as a web Response, for hono's routes. */
export function errorResponse(
  err: unknown,
  requestId: string,
  log: Logger,
  extraHeaders: Record<string, string> = {},
): Response {
  const a = errorAnswer(err, requestId, log, extraHeaders)
  return new Response(a.body as string, { status: a.status, headers: a.headers })
}
