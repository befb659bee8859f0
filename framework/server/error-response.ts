import type { Logger } from 'pino'
import { BundleError, isBundleError } from '../../errors/index.js'

export interface ErrorBody {
  error: { code: string; message: string; details?: unknown; requestId: string }
}

/**
 * The one place an error becomes an HTTP response. Expected errors keep their code, status and
 * message; anything else is a 500 with a generic message — the full error goes to the log only,
 * so stack traces and internal paths never reach a client.
 */
export function errorResponse(err: unknown, requestId: string, log: Logger, extraHeaders: Record<string, string> = {}): Response {
  let e: BundleError
  if (isBundleError(err)) {
    e = err
    if (e.status >= 500) log.error({ requestId, code: e.code, err: e.cause ?? e, details: e.details }, e.message)
  } else {
    log.error({ requestId, err }, 'unhandled error in request')
    e = new BundleError('E_INTERNAL', 'internal server error; the server log has the details under this request id')
  }
  const body: ErrorBody = { error: { code: e.code, message: e.message, ...(e.details === undefined ? {} : { details: e.details }), requestId } }
  return new Response(JSON.stringify(body), { status: e.status, headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...extraHeaders } })
}
