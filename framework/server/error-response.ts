import type { Logger } from 'pino'
import { BundleError, isBundleError } from '../../errors/index.js'

export interface ErrorBody {
  error: { code: string; message: string; details?: unknown; requestId: string }
}

// 5xx codes whose message is written for clients (no paths, no internals): shown as they are.
const CLIENT_SAFE_5XX = new Set(['E_HTTP_NOT_READY', 'E_HTTP_TIMEOUT', 'E_RUNNER_OVERLOADED', 'E_RUNNER_CRASHED', 'E_RUNNER_TIMEOUT', 'E_RUNNER_STOPPED', 'E_REMOTE_UNAVAILABLE', 'E_REMOTE_NO_WORKERS', 'E_REMOTE_MODEL_MISMATCH'])

/** A client that hung up mid-request: not a server error, nothing to answer. */
export function isClientGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNABORTED' || (err as Error | null)?.message === 'aborted' || (err as Error | null)?.name === 'AbortError'
}

/**
 * The one place an error becomes an HTTP response. 4xx errors keep their code, message and
 * details (they are about the client's input). 5xx errors are logged in full and answered
 * with a message written for clients: the runners' and readiness codes as they are,
 * E_OUTPUT_INVALID with its catalog text, anything else as E_INTERNAL — stack traces, file
 * paths and validation details of our own output never reach a client.
 */
export function errorResponse(err: unknown, requestId: string, log: Logger, extraHeaders: Record<string, string> = {}): Response {
  let e: BundleError
  if (isClientGone(err)) {
    log.info({ requestId }, 'client closed the connection before the response')
    e = new BundleError('E_HTTP_CLIENT_CLOSED', 'the client closed the connection')
  } else if (isBundleError(err) && err.status < 500) {
    e = err
  } else if (isBundleError(err) && CLIENT_SAFE_5XX.has(err.code)) {
    e = err
    log.warn({ requestId, code: e.code, err: e.cause }, e.message)
  } else if (isBundleError(err) && err.code === 'E_OUTPUT_INVALID') {
    log.error({ requestId, code: err.code, details: err.details }, err.message)
    e = new BundleError('E_OUTPUT_INVALID', 'the API produced an output that does not match its schema; the server log has the details under this request id')
  } else {
    log.error({ requestId, err }, isBundleError(err) ? err.message : 'unhandled error in request')
    e = new BundleError('E_INTERNAL', 'internal server error; the server log has the details under this request id')
  }
  if (e.code === 'E_HTTP_UNAUTHORIZED') extraHeaders = { ...extraHeaders, 'www-authenticate': 'Bearer' }
  const body: ErrorBody = { error: { code: e.code, message: e.message, ...(e.details === undefined ? {} : { details: e.details }), requestId } }
  return new Response(JSON.stringify(body), { status: e.status, headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...extraHeaders } })
}
