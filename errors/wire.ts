import { BundleError, isBundleError } from './bundle-error.js'
import { CATALOG, type ErrorCode } from './catalog.js'

/**
 * An error as it crosses a process boundary (runner worker IPC, a remote worker's answer through
 * Redis): plain data the structured-clone and JSON serializers both carry. Only catalog codes
 * travel; anything else arrives as a plain failure of the call.
 */
export interface WireError {
  message: string
  code?: ErrorCode
  details?: unknown
}

export const isErrorCode = (code: unknown): code is ErrorCode =>
  typeof code === 'string' && Object.hasOwn(CATALOG, code)

/** The wire form of whatever a worker caught. */
export function errorToWire(err: unknown): WireError {
  const e = err as { message?: unknown; code?: unknown; details?: unknown } | null | undefined
  const message = typeof e?.message === 'string' ? e.message : String(err)
  if (!isErrorCode(e?.code)) return { message }
  const details = isBundleError(err) ? err.details : e?.details
  return details === undefined ? { code: e.code, message } : { code: e.code, message, details }
}

/**
 * The error to raise on this side: a coded one stays a BundleError with its code and details
 * (so a client sees the status and code the worker meant); an uncoded one becomes `fallback`.
 */
export function errorFromWire(w: WireError, fallback: (message: string) => Error = (m) => new Error(m)): Error {
  if (isErrorCode(w.code))
    return new BundleError(w.code, w.message, w.details === undefined ? {} : { details: w.details })
  return fallback(w.message)
}
