import { type RouteSpec, route } from '../../route-spec.js'

/**
 * The Open Inference Protocol's HTTP routes. As Triton leaves them, read-only server and model
 * metadata, health and statistics are open; inference and the model repository extension need
 * the key. Handlers: routes.ts, keyed by path.
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
