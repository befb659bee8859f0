import { CATALOG, type ErrorCode } from './catalog.js'

// A brand instead of instanceof: two copies of modelbundle in one process (a service importing
// the package, a test importing the source) must still recognise each other's errors.
const BRAND = Symbol.for('modelbundle.BundleError')

/**
 * A coded error is expected: its code and message say what happened, and it is answered or printed
 * without its own stack (cli/errors.ts prints a cause's). Capturing one took 7 of the 8 µs a
 * BundleError cost (measured here), and under overload a refusal is one per request turned away:
 * stacks are kept only with BUNDLE_DEBUG=1.
 */
const KEEP_STACKS = process.env.BUNDLE_DEBUG === '1'

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
    const limit = Error.stackTraceLimit
    if (!KEEP_STACKS) Error.stackTraceLimit = 0
    try {
      super(message, options.cause === undefined ? undefined : { cause: options.cause })
    } finally {
      Error.stackTraceLimit = limit
    }
    this.name = 'BundleError'
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

// On the prototype, not each instance: one defineProperty less per error.
Object.defineProperty(BundleError.prototype, BRAND, { value: true })

export const isBundleError = (err: unknown): err is BundleError =>
  err instanceof BundleError ||
  (typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[BRAND] === true)
