/**
 * The route table: every route the server answers, declared once — method, path, whether it
 * needs the API key, and what it is. The parts mount their handlers on these paths; from the
 * table come the paths that answer without the key (auth), the paths a service API may not use
 * (service/definition.ts), the 405s of the operational routes, and `bundle serve --print-routes`.
 * A route added to a part and not here is keyed and unlisted: test/framework/route-table.test.ts
 * requests every route of the table and fails on one the server does not answer.
 * It imports nothing, so the service definition and the server can both read it.
 */
export type Access = 'open' | 'keyed'
export type Part = 'infra' | 'v2' | 'api' | 'task' | 'websocket'

export interface RouteSpec {
  method: 'GET' | 'POST'
  /** `:name` is one path segment. */
  path: string
  access: Access
  part: Part
  what: string
}

const route = (method: RouteSpec['method'], path: string, access: Access, part: Part, what: string): RouteSpec => ({
  method,
  path,
  access,
  part,
  what,
})

/**
 * Probes for orchestrators, /metrics for Prometheus, the docs and schema (they describe what the
 * API already tells its callers) are open; /runners shows module paths and the whole runner
 * configuration, so it needs the key.
 */
export const INFRA_ROUTES: readonly RouteSpec[] = [
  route('GET', '/livez', 'open', 'infra', 'the process is up'),
  route('GET', '/healthz', 'open', 'infra', 'alias of /livez'),
  route('GET', '/readyz', 'open', 'infra', 'start-up finished and every runner is ready'),
  route('GET', '/metrics', 'open', 'infra', 'Prometheus metrics'),
  route('GET', '/openapi.json', 'open', 'infra', "the service's OpenAPI document"),
  route('GET', '/docs', 'open', 'infra', 'the API docs page'),
  route('GET', '/docs/assets/:name', 'open', 'infra', "the docs page's scripts and styles"),
  route('GET', '/runners', 'keyed', 'infra', "the runners' settings and batchers"),
  route('GET', '/', 'open', 'infra', 'redirects to /docs'),
]

/**
 * The Open Inference Protocol. As Triton leaves them, read-only server and model metadata,
 * health and statistics are open; inference and the model repository extension need the key.
 */
export const V2_ROUTES: readonly RouteSpec[] = [
  route('GET', '/v2', 'open', 'v2', 'server metadata'),
  route('GET', '/v2/health/live', 'open', 'v2', 'server live'),
  route('GET', '/v2/health/ready', 'open', 'v2', 'server ready'),
  route('GET', '/v2/models/stats', 'open', 'v2', "every model's statistics"),
  route('POST', '/v2/repository/index', 'keyed', 'v2', 'the models the store holds, and their state'),
  route('POST', '/v2/repository/models/:model/load', 'keyed', 'v2', 'load a model'),
  route('POST', '/v2/repository/models/:model/unload', 'keyed', 'v2', 'unload a model'),
  ...['/v2/models/:model', '/v2/models/:model/versions/:version'].flatMap((base) => [
    route('GET', base, 'open', 'v2', 'model metadata'),
    route('GET', `${base}/ready`, 'open', 'v2', 'model ready'),
    route('GET', `${base}/config`, 'open', 'v2', 'model configuration'),
    route('GET', `${base}/stats`, 'open', 'v2', 'model statistics'),
    route('POST', `${base}/infer`, 'keyed', 'v2', 'inference'),
  ]),
]

export const SERVER_ROUTES: readonly RouteSpec[] = [...INFRA_ROUTES, ...V2_ROUTES]

/** What the table needs of a service's API. */
export interface ApiRoute {
  name: string
  route: string
  task?: unknown
  input: { kind: string }
}

/** A service's own routes: each API's POST, a task API's five routes, a WebSocket API's upgrade. All keyed. */
export function serviceRoutes(apis: readonly ApiRoute[]): RouteSpec[] {
  return apis.flatMap((a): RouteSpec[] => {
    if (a.task)
      return [
        route('POST', `${a.route}/submit`, 'keyed', 'task', `${a.name}: submit a task`),
        route('GET', `${a.route}/status`, 'keyed', 'task', `${a.name}: a task's state`),
        route('GET', `${a.route}/result`, 'keyed', 'task', `${a.name}: a finished task's output`),
        route('POST', `${a.route}/cancel`, 'keyed', 'task', `${a.name}: cancel a task`),
        route('POST', `${a.route}/retry`, 'keyed', 'task', `${a.name}: retry a task`),
      ]
    if (a.input.kind === 'stream') return [route('GET', a.route, 'keyed', 'websocket', `${a.name} (WebSocket)`)]
    return [route('POST', a.route, 'keyed', 'api', a.name)]
  })
}

/** Every route a server of these APIs answers. */
export const routeTable = (apis: readonly ApiRoute[]): RouteSpec[] => [...SERVER_ROUTES, ...serviceRoutes(apis)]

const patternOf = (path: string): RegExp =>
  new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z]+/g, '[^/]+')}$`)

const OPEN = SERVER_ROUTES.filter((r) => r.access === 'open')
const OPEN_EXACT = new Set(OPEN.filter((r) => !r.path.includes(':')).map((r) => r.path))
const OPEN_PATTERNS = OPEN.filter((r) => r.path.includes(':')).map((r) => patternOf(r.path))

/**
 * Whether `path` (as the router matches it) answers without the API key. Everything not declared
 * open — every service route and any path that is not a route at all — needs it, so a client
 * without the key learns nothing about what exists.
 */
export function isOpenPath(path: string): boolean {
  return OPEN_EXACT.has(path) || OPEN_PATTERNS.some((re) => re.test(path))
}

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
