import { createHash, timingSafeEqual } from 'node:crypto'
import { BundleError } from '../../errors/index.js'

/**
 * Which routes answer without the API key. Everything else — every service API, task route
 * (submit, status, result, cancel, retry), /v2 inference and the model repository extension
 * (index, load, unload), /runners (it shows module paths and the whole runner configuration),
 * and any route added later — needs `Authorization: Bearer <key>` once the server has one.
 * The open ones change nothing and hold no user data, as Triton leaves them open: probes for
 * orchestrators, /metrics for Prometheus, the docs and schema (they describe what the API
 * already tells its callers), and read-only /v2 server and model metadata, health and stats.
 * Unknown paths need the key too, so a client without it learns nothing about what exists.
 */
const OPEN_EXACT = new Set([
  '/',
  '/livez',
  '/healthz',
  '/readyz',
  '/metrics',
  '/openapi.json',
  '/docs',
  '/v2',
  '/v2/health/live',
  '/v2/health/ready',
  '/v2/models/stats',
])
const OPEN_PATTERNS = [
  /^\/docs\/assets\/[^/]+$/,
  /^\/v2\/models\/[^/]+(?:\/versions\/[^/]+)?(?:\/(?:ready|config|stats))?$/,
]

/** Whether `path` (as the router matches it) answers without the API key. */
export function isOpenPath(path: string): boolean {
  return OPEN_EXACT.has(path) || OPEN_PATTERNS.some((re) => re.test(path))
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/**
 * Checks a request's Authorization header against the key. Both sides are hashed first, so
 * the comparison is constant-time and its length says nothing about the key's.
 */
export function keyChecker(apiKey: string): (authorization: string | undefined) => void {
  const want = digest(apiKey)
  return (authorization) => {
    const m = /^Bearer\s+(.+)$/i.exec(authorization ?? '')
    if (!m || !timingSafeEqual(digest(m[1]!.trim()), want))
      throw new BundleError(
        'E_HTTP_UNAUTHORIZED',
        m ? 'the API key is not valid' : 'this server requires an API key: send Authorization: Bearer <key>',
      )
  }
}
