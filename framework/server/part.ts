import type { Context, MiddlewareHandler, Next } from 'hono'
import { BundleError } from '../../errors/index.js'
import type { PartName, RouteSpec } from '../route-spec.js'
import type { ServerHono } from './app-parts.js'

// A middleware-style handler may call next() and answer nothing (a WebSocket upgrade does).
export type Handler = (c: Context, next: Next) => Response | ReturnType<MiddlewareHandler>

/** A route as a part mounts it: its declaration and its handler. */
export interface Route extends RouteSpec {
  readonly handler: Handler
}

/**
 * One part of the HTTP server (infra, /v2, tasks, WebSocket, the service's APIs): the routes it
 * answers, each declared once with its handler. The app mounts its parts (mountParts) and derives
 * the rest from them: which paths are open, the 405s, `--print-routes`, the OpenAPI infra paths.
 */
export interface ServerPart {
  readonly name: PartName
  readonly routes: readonly Route[]
  /** How this part answers an error the app raises before its handlers (401, 405): /v2 has its own shape. */
  readonly answer?: (c: Context, err: unknown, headers: Record<string, string>) => Response
}

/** A protocol part served on a port of its own (gRPC): its routes, and how it starts listening. */
export interface PortPart {
  readonly name: PartName
  readonly routes: readonly RouteSpec[]
  /** Opens its port on `host`; a failure is a coded error naming the address. */
  listen(host: string): Promise<Listening>
}

export interface Listening {
  /** Where it listens, as its clients address it (`grpc://host:port`). */
  readonly url: string
  /** Stops taking calls; waits up to `graceMs` for those in flight, then cuts the rest. */
  close(graceMs: number): Promise<void>
}

/**
 * Joins a part's declared routes to its handlers, keyed `METHOD path`. A declared route without
 * a handler, or a handler for a route it does not declare, is a bug in the part: it fails here,
 * when the app is made, rather than as a 404 in production.
 */
export function bind(specs: readonly RouteSpec[], handlers: Readonly<Record<string, Handler>>): Route[] {
  const unused = new Set(Object.keys(handlers))
  const routes = specs.map((spec) => {
    const key = `${spec.method} ${spec.path}`
    const handler = handlers[key]
    if (handler === undefined) throw new BundleError('E_INTERNAL', `route ${key} is declared without a handler`)
    unused.delete(key)
    return { ...spec, handler }
  })
  if (unused.size) throw new BundleError('E_INTERNAL', `handlers for undeclared routes: ${[...unused].join(', ')}`)
  return routes
}

/** A path's pattern as the router matches it (`:name` is one segment). */
const patternOf = (path: string): RegExp =>
  new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z]+/g, '[^/]+')}$`)

/** Finds the routes at a request path: exact paths by lookup, parameterised ones by pattern. */
export class RouteIndex<R extends RouteSpec> {
  private readonly exact = new Map<string, R[]>()
  private readonly patterns: { re: RegExp; route: R }[] = []

  constructor(routes: readonly R[]) {
    for (const r of routes) {
      if (r.path.includes(':')) this.patterns.push({ re: patternOf(r.path), route: r })
      else this.exact.set(r.path, [...(this.exact.get(r.path) ?? []), r])
    }
  }

  at(path: string): readonly R[] {
    const found = this.exact.get(path)
    if (this.patterns.length === 0) return found ?? []
    const matched = this.patterns.filter((p) => p.re.test(path)).map((p) => p.route)
    return found ? [...found, ...matched] : matched
  }

  /**
   * Whether `path` answers without the API key. Everything not declared open — every service
   * route and any path that is not a route at all — needs it, so a client without the key learns
   * nothing about what exists.
   */
  isOpen(path: string): boolean {
    return this.at(path).some((r) => r.access === 'open')
  }
}

/**
 * Mounts every part's routes, then a 405 (with Allow) for each of their paths' other methods,
 * answered in the part's shape. Two parts declaring one route is a bug: it fails here.
 */
export function mountParts(
  app: ServerHono,
  parts: readonly ServerPart[],
  answer: (c: Context, err: unknown, headers: Record<string, string>) => Response,
): RouteSpec[] {
  const methods = new Map<string, { part: ServerPart; methods: string[] }>()
  for (const part of parts)
    for (const r of part.routes) {
      const at = methods.get(r.path)
      if (at?.methods.includes(r.method)) throw new BundleError('E_INTERNAL', `${r.method} ${r.path} is mounted twice`)
      if (at) at.methods.push(r.method)
      else methods.set(r.path, { part, methods: [r.method] })
      app.on(r.method, r.path, r.handler as never)
    }
  for (const [path, at] of methods) {
    const allow = at.methods.join(', ')
    const refuse = at.part.answer ?? answer
    app.all(path, (c) => refuse(c, new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${path} takes ${allow}`), { allow }))
  }
  return parts.flatMap((p) => p.routes.map(({ handler: _, ...spec }) => spec))
}
