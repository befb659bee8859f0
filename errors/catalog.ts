/**
 * The one error catalog. Every error modelbundle raises on purpose has a stable code here,
 * with the HTTP status a server answers with, the exit code the CLI ends with, and a
 * one-line fix. docs/errors.md is the same table for humans; a test keeps the two in sync.
 *
 * exit 2 = the user's input is malformed (usage); exit 1 = a well-formed request failed.
 */
import { BUNDLES } from './catalog/bundles.js'
import { CLI } from './catalog/cli.js'
import type { CatalogEntry } from './catalog/entry.js'
import { RUNNERS } from './catalog/runners.js'
import { SERVER } from './catalog/server.js'
import { SIGNING } from './catalog/signing.js'
import { STORE } from './catalog/store.js'

export type { CatalogEntry } from './catalog/entry.js'

// One catalog, its rows kept by the part of the product they belong to (errors/catalog/).
export const CATALOG = {
  ...CLI,
  ...STORE,
  ...SERVER,
  ...RUNNERS,
  ...BUNDLES,
  ...SIGNING,
} as const satisfies Record<string, CatalogEntry>

export type ErrorCode = keyof typeof CATALOG

export const errorCodes = (): ErrorCode[] => Object.keys(CATALOG) as ErrorCode[]

/**
 * Codes that mean "this request was not run; the same request may succeed shortly": shed by a
 * runner, over maxConcurrency, not ready (yet, or any more), no remote worker or Redis. The
 * server answers them with `Retry-After`; the typed client retries them after it.
 */
export const RETRYABLE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'E_HTTP_TOO_MANY_REQUESTS',
  'E_RUNNER_OVERLOADED',
  'E_HTTP_NOT_READY',
  'E_RUNNER_STOPPED',
  'E_REMOTE_UNAVAILABLE',
  'E_REMOTE_NO_WORKERS',
  'E_MODEL_LOAD_TIMEOUT',
])
