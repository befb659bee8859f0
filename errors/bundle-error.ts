import { CATALOG, type ErrorCode } from './catalog.js'

// A brand instead of instanceof: two copies of modelbundle in one process (a service importing
// the package, a test importing the source) must still recognise each other's errors.
const BRAND = Symbol.for('modelbundle.BundleError')

export interface BundleErrorOptions {
  /** Structured facts a client can act on (validation issues, candidate versions). */
  details?: unknown
  cause?: unknown
}

/**
 * The one error class. Code, status and exit code come from the catalog so a caller never
 * has to pick them twice; the message is specific to this occurrence.
 *
 * @example
 * throw new BundleError('E_STORE_MODEL_NOT_FOUND', 'no model matches "ocr-cls:abc"')
 */
export class BundleError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly exitCode: 1 | 2
  readonly details?: unknown

  constructor(code: ErrorCode, message: string, options: BundleErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'BundleError'
    Object.defineProperty(this, BRAND, { value: true })
    this.code = code
    this.status = CATALOG[code].status
    this.exitCode = CATALOG[code].exit
    if (options.details !== undefined) this.details = options.details
  }

  /** The catalog's one-line fix for this code. */
  get fix(): string {
    return CATALOG[this.code].fix
  }

  toJSON(): { code: ErrorCode; message: string; details?: unknown } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details }
  }
}

export const isBundleError = (err: unknown): err is BundleError =>
  err instanceof BundleError ||
  (typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[BRAND] === true)
