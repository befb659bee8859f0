import { CommanderError } from 'commander'
import { BundleError, isBundleError } from '../errors/index.js'

/**
 * The CLI's single exit path for failures: one line on stderr with the code, exit 2 for usage
 * errors and 1 for failures. Stacks only with BUNDLE_DEBUG=1 — expected errors never print one.
 */
export function reportError(err: unknown): number {
  if (err instanceof CommanderError) {
    // commander already printed its (reformatted) message; help and --version end with 0
    if (err.exitCode === 0) return 0
    return 2
  }
  const debug = process.env.BUNDLE_DEBUG === '1'
  if (isBundleError(err)) {
    process.stderr.write(`error ${err.code}: ${err.message}\n`)
    if (debug && err.cause) process.stderr.write(`${(err.cause as Error).stack ?? String(err.cause)}\n`)
    return err.exitCode
  }
  const wrapped = new BundleError(
    'E_INTERNAL',
    `unexpected error: ${(err as Error)?.message ?? String(err)} (set BUNDLE_DEBUG=1 for details)`,
  )
  process.stderr.write(`error ${wrapped.code}: ${wrapped.message}\n`)
  if (debug) process.stderr.write(`${(err as Error)?.stack ?? ''}\n`)
  return 1
}
