import type { MiddlewareHandler } from 'hono'
import { cors } from 'hono/cors'

/**
 * Cross-origin access for browser apps on other origins, off unless origins are listed: with
 * none, no response carries Access-Control-Allow-Origin and a preflight is granted nothing, so
 * a page elsewhere cannot read answers. `*` grants every origin. No credentials mode: the API
 * key travels in the Authorization header, which preflights allow, never in cookies.
 */
export function corsMiddleware(origins: readonly string[]): MiddlewareHandler | undefined {
  if (origins.length === 0) return undefined
  const any = origins.includes('*')
  const allowed = new Set(origins.map((o) => o.replace(/\/+$/, '')))
  return cors({
    origin: (origin) => (any ? '*' : allowed.has(origin) ? origin : null),
    allowMethods: ['GET', 'HEAD', 'POST'],
    // Read by clients: the request id, the binary tensor extension's JSON length, a binary
    // tensor answer's shape and dtype, a file's name, and how long to back off when shed.
    exposeHeaders: [
      'x-request-id',
      'inference-header-content-length',
      'content-disposition',
      'x-tensor-shape',
      'x-tensor-dtype',
      'retry-after',
    ],
    maxAge: 600,
  })
}
