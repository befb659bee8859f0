import { INFRA_ROUTES } from './server/infra-routes.js'
import { V2_ROUTES } from './server/v2/route-list.js'
import { GRPC_ROUTES } from './server/grpc/route-list.js'
import type { RouteSpec } from './route-spec.js'

/**
 * What follows from the routes the parts declare (framework/route-spec.ts): the paths no service
 * API may use, and the table as `bundle serve --print-routes` prints it. The open paths, the
 * 405s and the OpenAPI infra paths come from the routes an app mounts (server/part.ts).
 */
export type { Access, PartName, RouteSpec } from './route-spec.js'

/** GRPCInferenceService's methods, on the gRPC port when there is one. */
export { GRPC_ROUTES }

/** The routes every server mounts, whatever its service: the operational ones and /v2. */
export const SERVER_ROUTES: readonly RouteSpec[] = [...INFRA_ROUTES, ...V2_ROUTES]

/** The first segments the server's own routes use ('/v2', '/docs', …; '/' alone): no service API may use them. */
export const RESERVED_PREFIXES: readonly string[] = [
  ...new Set(SERVER_ROUTES.map((r) => (r.path === '/' ? '/' : `/${r.path.split('/')[1]}`))),
]

/** Whether a service route would collide with the server's own. */
export const isReserved = (apiRoute: string): boolean =>
  RESERVED_PREFIXES.some((r) => apiRoute === r || (r !== '/' && apiRoute.startsWith(`${r}/`)))

/** The table as `bundle serve --print-routes` prints it: one route a line, aligned. */
export function formatRoutes(table: readonly RouteSpec[]): string {
  const width = Math.max(...table.map((r) => r.path.length))
  return table.map((r) => `${r.method.padEnd(5)}${r.path.padEnd(width + 2)}${r.access.padEnd(7)}${r.what}\n`).join('')
}
