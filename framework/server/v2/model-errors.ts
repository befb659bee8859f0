import { BundleError, isBundleError } from '../../../errors/index.js'
import { redactPaths } from '../error-response.js'

// The texts of Triton's errors about models, which its clients (and users' scripts) match on:
// "Request for unknown model: 'x' is not found", "… has no available versions", "failed to load
// 'x' …". Each carries our own catalog code and, after the Triton text, what to do about it.

/** A name neither the store nor the server knows. */
export const unknownModel = (name: string): BundleError =>
  new BundleError(
    'E_MODEL_NOT_FOUND',
    `Request for unknown model: '${name}' is not found; POST /v2/repository/index lists the models`,
  )

/** A known model with no version loaded now; `reason`: why (unloaded, a failed load). */
export const noAvailableVersions = (name: string, reason: string | undefined): BundleError =>
  new BundleError(
    'E_MODEL_NOT_FOUND',
    `Request for unknown model: '${name}' has no available versions` +
      `${reason ? ` (${reason})` : ''}; load it with POST /v2/repository/models/${name}/load`,
  )

/** A version of a loaded model that is not loaded. */
export const versionNotFound = (name: string, version: string, loaded: readonly string[]): BundleError =>
  new BundleError(
    'E_MODEL_NOT_FOUND',
    `Request for unknown model: '${name}' version ${version} is not found (loaded: ${loaded.join(', ')})`,
  )

/** A version that is loaded but not ready (still loading, or unloading). */
export const versionNotReady = (name: string, version: string): BundleError =>
  new BundleError('E_HTTP_NOT_READY', `Request for unknown model: '${name}' version ${version} is not at ready state`)

/**
 * A load that failed, as Triton words it: "failed to load 'x': <the reason>". Bad settings and
 * what the runtime refused are the client's to fix (400); an unknown model stays a 404; a
 * server-side fault keeps its own code. File paths never reach the client.
 */
export function loadFailed(name: string, err: unknown): BundleError {
  const message = redactPaths((err as Error)?.message ?? String(err))
  const code = isBundleError(err) ? err.code : undefined
  // A refused signature keeps its own code (E_SIG_*): the operator acts on which check failed.
  const keep =
    code === 'E_MODEL_NOT_FOUND' ||
    code === 'E_HTTP_NOT_READY' ||
    code === 'E_RUNNER_STOPPED' ||
    code?.startsWith('E_SIG_') === true
  // The Open Inference Protocol's error body is a message alone: a refused signature names its code in it.
  const why = code?.startsWith('E_SIG_') ? `${code}: ${message}` : message
  return new BundleError(keep ? code : 'E_MODEL_LOAD_FAILED', `failed to load '${name}': ${why}`, {
    cause: err,
  })
}

/**
 * Statistics of a model not serving now answer as Triton's do: "requested model 'x' is not
 * available", a 400 (INVALID_ARGUMENT), not a 404.
 */
export function forStatistics<T>(name: string, fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (isBundleError(err) && err.code === 'E_MODEL_NOT_FOUND')
      throw new BundleError('E_INPUT_INVALID', `requested model '${name}' is not available`, { cause: err })
    throw err
  }
}
