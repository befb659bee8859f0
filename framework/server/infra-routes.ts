import { type RouteSpec, route } from '../route-spec.js'

const probe = { answers: { '200': 'ok', '503': 'not ready' } }

/**
 * The server's operational routes. Probes for orchestrators, /metrics for Prometheus, the docs
 * and schema (they describe what the API already tells its callers) are open; /runners shows
 * module paths and the whole runner configuration, so it needs the key. Routes with `answers`
 * are documented in the service's OpenAPI document. Handlers: infra.ts.
 */
export const INFRA_ROUTES: readonly RouteSpec[] = [
  route('GET', '/livez', 'open', 'infra', 'the process is up', probe),
  route('GET', '/healthz', 'open', 'infra', 'alias of /livez', probe),
  route('GET', '/readyz', 'open', 'infra', 'start-up finished and every runner is ready', probe),
  route('GET', '/metrics', 'open', 'infra', 'Prometheus metrics', {
    answers: { '200': 'Prometheus text format' },
    contentType: 'text/plain',
  }),
  route('GET', '/openapi.json', 'open', 'infra', "the service's OpenAPI document"),
  route('GET', '/docs', 'open', 'infra', 'the API docs page'),
  route('GET', '/docs/assets/:name', 'open', 'infra', "the docs page's scripts and styles"),
  route('GET', '/runners', 'keyed', 'infra', "the runners' settings and batchers"),
  route('GET', '/', 'open', 'infra', 'redirects to /docs'),
]
