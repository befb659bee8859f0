/**
 * What a route is, as the parts of the server declare theirs: method, path, whether it needs the
 * API key, and what it is. Each part declares its own routes beside its handlers (infra-routes.ts,
 * v2/route-list.ts, tasks/routes.ts, websocket/routes.ts, app-routes.ts, grpc/route-list.ts); the
 * server mounts the parts and derives the rest from what it mounted (framework/routes.ts).
 * It imports nothing, so data-only route lists can be read without loading the server.
 */
export type Access = 'open' | 'keyed'
/** The server's parts, each mounting its own routes. */
export type PartName = 'infra' | 'v2' | 'api' | 'task' | 'websocket' | 'grpc'

export interface RouteSpec {
  /** HTTP methods, or RPC for a gRPC method on the gRPC port. */
  method: 'GET' | 'POST' | 'RPC'
  /** `:name` is one path segment; a gRPC route's path is its method's name. */
  path: string
  access: Access
  part: PartName
  what: string
  /** How OpenAPI documents it: its answers by status (the infra routes; a service's APIs have their own). */
  answers?: Readonly<Record<string, string>>
  /** The answer's media type, for OpenAPI. */
  contentType?: string
}

export const route = (
  method: RouteSpec['method'],
  path: string,
  access: Access,
  part: PartName,
  what: string,
  doc: Pick<RouteSpec, 'answers' | 'contentType'> = {},
): RouteSpec => ({ method, path, access, part, what, ...doc })
