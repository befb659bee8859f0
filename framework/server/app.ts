import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Hono } from 'hono'
import pino, { type Logger } from 'pino'
import { BundleError, isBundleError } from '../../errors/index.js'
import {
  type GpuMonitor,
  type GpuPlacement,
  RunnerMetrics,
  type RedisLink,
  type Runner,
  type RunnerOverrides,
  startGpuMonitor,
  gpuMetricsInterval,
  ortSeverity,
} from '../../runners/index.js'
import type { ServiceDefinition } from '../service/definition.js'
import { accessLog } from './access-log.js'
import { isOpenPath, keyChecker } from './auth.js'
import { DEFAULT_MAX_BODY_BYTES } from './body.js'
import { corsMiddleware } from './cors.js'
import { Deadlines } from './deadlines.js'
import { docsAsset, docsPage } from './docs.js'
import { errorResponse } from './error-response.js'
import { ExchangeHeaders, honoExchange, type Answer } from './exchange.js'
import { fastPath } from './fast-path.js'
import { Lifecycle, type Phase } from './lifecycle.js'
import { LogSink } from './log-sink.js'
import { createMetrics, type ServerMetrics } from './metrics.js'
import { type MetricsCompat, metricsCompat, registerTritonMetrics } from './triton-metrics.js'
import { openapiDocument } from './openapi.js'
import { RequestPipeline } from './pipeline.js'
import { traceFields } from './request-span.js'
import { frameworkVersion, headerOf, SANE_REQUEST_ID } from './request.js'
import { readableOf, StreamAnswer } from './streaming.js'
import { TaskService } from './tasks/queue.js'
import { isWebSocketApi, WebSocketRoutes, wsLimits, type WsLimits } from './websocket/routes.js'
import { mountTaskRoutes } from './tasks/routes.js'
import { ModelRepository, type ServedModel } from './v2/repository.js'
import { mountV2, v2Error, type V2Options } from './v2/routes.js'

export type { Phase } from './lifecycle.js'

export interface AppOptions {
  /**
   * Require `Authorization: Bearer <key>` on every route but probes, metrics, docs and read-only metadata (see
   * auth.ts).
   */
  apiKey?: string
  /** Origins browsers may call this server from (CORS); `*` for any. Default none: CORS off. */
  corsOrigins?: readonly string[]
  /** Largest request body in bytes (default 32 MiB). */
  maxBodyBytes?: number
  logger?: Logger
  /** One log line per request (default true; BUNDLE_ACCESS_LOG=0 turns it off). */
  accessLog?: boolean
  /**
   * A Server-Timing header on API answers: where the request's time went (body read, decode,
   * runner queue, transfer and compute, the method, encode). Default off; BUNDLE_SERVER_TIMING=1.
   */
  serverTiming?: boolean
  /**
   * Also export another server's metric names from the same measurements: `triton` adds Triton's
   * nv_inference_* series per model and version (see docs/operations.md). Default
   * BUNDLE_METRICS_COMPAT, else none.
   */
  metricsCompat?: MetricsCompat | 'none'
  /** WebSocket routes' limits (message size, messages a second, idle timeout); else BUNDLE_WS_* or defaults. */
  websocket?: Partial<WsLimits>
  /** Runner overrides keyed by runner name (a serve config file's `runners:`); env wins over these. */
  runnerConfig?: Record<string, RunnerOverrides>
  /** Shown in OpenAPI `info.version`. */
  version?: string
  /** Model store the repository extension loads from (default $BUNDLE_HOME). */
  storeHome?: string
  /**
   * Models of the store to load at start-up next to the service's runners (`bundle serve
   * --models`); one that fails to load is logged and stays UNAVAILABLE, the others serve.
   */
  models?: readonly ServedModel[]
  /** Which store models a load may bring in (default: any); `bundle serve --models` limits it to its patterns. */
  servable?: (name: string) => boolean
  /** Redis (--redis): response caches and tasks use it. */
  redis?: RedisLink
  /** Names queues in Redis (tasks): the bundle or service (default the service name). */
  scope?: string
  /**
   * Runners send their batches to remote workers through this Redis; queues are named after
   * `scope` (bundle or service). `graceMs`: while no worker is live, how long a batch waits for
   * one before 503 E_REMOTE_NO_WORKERS (default 2 000; 0 = at once).
   */
  remote?: { link: RedisLink; scope: string; graceMs?: number }
}

export interface ServiceApp {
  readonly app: Hono
  readonly definition: ServiceDefinition
  readonly metrics: ServerMetrics
  readonly log: Logger
  phase(): Phase
  /**
   * Applies operator overrides (config file, BUNDLE_RUNNER_*) to the runners and checks what the
   * service needs of the server (Redis for tasks), throwing E_SERVE_CONFIG_INVALID on the first
   * problem. serve() calls it before it listens, so a bad setting never gets a socket; start()
   * calls it too. Runs once.
   */
  configure(): void
  /** Creates the instance, runs start-up hooks and starts runners; /readyz turns 200 after. */
  start(): Promise<void>
  /** /readyz turns 503 and new API requests are refused; in-flight ones continue. */
  drain(): void
  inFlight(): number
  /** Resolves when no API request is in flight. */
  idle(): Promise<void>
  /** Runs shutdown hooks and stops runners. */
  stop(): Promise<void>
  /**
   * For serve(): answers an API request straight from node's HTTP server and returns true, or
   * returns false (any other route, method) for the hono app to answer. Absent with CORS on.
   */
  readonly fastPath?: (req: IncomingMessage, res: ServerResponse) => boolean
  /** What the Open Inference Protocol serves (/v2 here; gRPC in serve() when asked for). */
  readonly protocol: Protocol
  /** Present when the service has WebSocket routes: serve() attaches a WebSocket server with this message cap. */
  readonly websocket?: { maxMessageBytes: number }
}

/** The models, readiness, limits and key both transports of the Open Inference Protocol use. */
export interface Protocol extends V2Options {
  checkKey?: (authorization: string | undefined) => void
}

const INFRA_PATHS = ['/livez', '/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', '/runners']

/**
 * Builds the hono app for a service. HTTP tests call `app.request()`; `serve()` puts it on a
 * socket. Every API request goes: auth → readiness → media type → body limit (no concurrency
 * slot is held while a body arrives) → concurrency → decode/validate → method (with timeout) →
 * encode, and ends in exactly one response.
 */
export function createServiceApp(definition: ServiceDefinition, options: AppOptions = {}): ServiceApp {
  // Checked before anything is made: a bad value fails with one coded line.
  const compat = metricsCompat(options.metricsCompat)
  ortSeverity(undefined, process.env.BUNDLE_ORT_LOG_LEVEL)
  // Buffered stdout (64 KiB or 250 ms, whichever first; see LogSink): a write(2) per access
  // line costs more than handling a small request. serve() flushes after lifecycle lines and at shutdown.
  const sink = options.logger ? undefined : new LogSink(1)
  const log =
    options.logger ??
    pino(
      // Lines logged inside a traced request carry its trace_id and span_id.
      { level: process.env.BUNDLE_LOG_LEVEL ?? 'info', base: { service: definition.name }, mixin: traceFields },
      sink,
    )
  const accessLogOn = options.accessLog ?? process.env.BUNDLE_ACCESS_LOG !== '0'
  const logAccess = accessLogOn ? accessLog(log, sink, definition.name) : undefined
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const metrics = createMetrics(
    definition.name,
    definition.apis.map((a) => a.name),
  )
  // Runner series cover the service's runners and the models loaded at run time (/v2/repository);
  // ensembles have no queue or workers of their own: their steps' runners publish them.
  const runnerMetrics = new RunnerMetrics(metrics.registry, definition.name, () => [
    ...definition.runners.filter((r) => r.kind !== 'ensemble'),
    ...repository.loaded(),
  ])
  const attach = (r: Runner) => {
    r.attachMetrics(runnerMetrics)
    r.attachLog?.(log)
  }
  for (const r of definition.runners) attach(r)
  const repository = new ModelRepository(definition.runners, {
    ...(options.storeHome ? { home: options.storeHome } : {}),
    ...(options.servable ? { servable: options.servable } : {}),
    attach,
  })
  if (compat === 'triton') registerTritonMetrics(metrics.registry, () => repository.models())
  const checkKey = options.apiKey ? keyChecker(options.apiKey) : undefined
  const taskApis = definition.apis.filter((a) => a.task)
  const redis = options.redis ?? options.remote?.link
  const tasks =
    taskApis.length && redis
      ? new TaskService({
          link: redis,
          scope: options.remote?.scope ?? options.scope ?? definition.name,
          apis: taskApis,
          log,
        })
      : undefined
  const lifecycle = new Lifecycle({
    definition,
    log,
    runnerConfig: options.runnerConfig,
    redis: options.redis,
    remote: options.remote,
    taskApis,
    tasks,
    repository,
    models: options.models ?? [],
  })
  const deadlines = new Deadlines(definition.traffic.timeoutMs)
  const serverTiming = options.serverTiming ?? process.env.BUNDLE_SERVER_TIMING === '1'
  const pipeline = new RequestPipeline({
    definition,
    lifecycle,
    metrics,
    log,
    deadlines,
    maxBodyBytes: maxBody,
    serverTiming,
  })
  const app = new Hono<{
    Variables: { requestId: string; headed?: boolean; trace?: { traceId: string; spanId: string } }
  }>()
  const sockets = new WebSocketRoutes({
    definition,
    lifecycle,
    log,
    registry: metrics.registry,
    limits: wsLimits(options.websocket, definition.traffic.timeoutMs),
  })

  app.use('*', async (c, next) => {
    const given = headerOf(c, 'x-request-id')
    const requestId = given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
    c.set('requestId', requestId)
    const started = performance.now()
    await next()
    // API responses and errors already carry the id in a plain header object (the fast path:
    // a Headers instance costs node-server a sort and a copy); other routes get it here.
    if (!c.get('headed')) c.res.headers.set('x-request-id', requestId)
    // While draining, tell keep-alive clients to reconnect (to another replica).
    if (lifecycle.phase === 'draining') c.res.headers.set('connection', 'close')
    logAccess?.(
      c.req.method,
      c.req.path,
      c.res.status,
      Math.round((performance.now() - started) * 100) / 100,
      requestId,
      c.get('trace'),
    )
  })

  // CORS before the key check: a browser's preflight carries no Authorization header.
  const cors = corsMiddleware(options.corsOrigins ?? [])
  if (cors) app.use('*', cors)
  if (checkKey) {
    // One check in front of every route, so a route added later is closed unless auth.ts opens it.
    const apiAt = new Map(definition.apis.filter((a) => !a.task).map((a) => [a.route, a]))
    app.use('*', async (c, next) => {
      const path = c.req.path
      if (!isOpenPath(path)) {
        try {
          checkKey(headerOf(c, 'authorization'))
        } catch (err) {
          const a = c.req.method === 'POST' ? apiAt.get(path) : undefined
          if (a) {
            // Refused calls still count in the endpoint's request metrics.
            const m = metrics.endpoint(a.name)
            m.begin()
            m.end(401, 0)
          }
          if (path === '/v2' || path.startsWith('/v2/')) return v2Error(c, err, log)
          throw err
        }
      }
      await next()
    })
  }

  app.get('/livez', (c) => c.json({ status: 'live' }))
  app.get('/healthz', (c) => c.json({ status: 'live' }))
  app.get('/readyz', (c) => {
    const phase = lifecycle.phase
    const waiting = phase === 'ready' ? lifecycle.notReady() : undefined
    if (phase === 'ready' && waiting === undefined) return c.json({ status: 'ready' })
    return c.json({ status: phase === 'ready' ? 'not ready' : phase, reason: waiting ?? lifecycle.reason }, 503)
  })
  // The service's runners, then the models loaded at run time (/v2/repository, bundle serve --models).
  app.get('/runners', (c) =>
    c.json(
      [...definition.runners, ...repository.loaded()].map((r) => {
        const batcher = r.stats()
        return { name: r.name, ready: r.ready(), config: r.effectiveConfig(), ...(batcher ? { batcher } : {}) }
      }),
    ),
  )
  app.get('/metrics', async (c) =>
    c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }),
  )
  const openapi = JSON.stringify(openapiDocument(definition, options.version))
  app.get('/openapi.json', (c) => c.body(openapi, 200, { 'content-type': 'application/json' }))
  app.get('/docs', (c) => c.html(docsPage(definition.name)))
  app.get('/docs/assets/:name', (c) => {
    const asset = docsAsset(c.req.param('name'))
    if (asset === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `no docs asset ${c.req.param('name')}`)
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, {
      'content-type': asset.contentType,
      'cache-control': 'public, max-age=86400',
    })
  })
  app.get('/', (c) => c.redirect('/docs'))
  const protocol: Protocol = {
    repository,
    ready: () => lifecycle.phase === 'ready' && lifecycle.notReady() === undefined,
    maxBodyBytes: maxBody,
    version: frameworkVersion(),
    log,
    track: (fn) => pipeline.track(fn),
    ...(checkKey ? { checkKey } : {}),
  }
  mountV2(app, protocol)

  if (tasks)
    mountTaskRoutes(app, tasks, {
      decode: async (c, a) => {
        if (lifecycle.phase !== 'ready' || lifecycle.instance === undefined) throw lifecycle.notServing()
        const ex = honoExchange(c)
        return await pipeline.decodeInput(new ExchangeHeaders(ex), a, await pipeline.readInput(ex, a))
      },
      respond: (c, err) => errorResponse(err, c.get('requestId') ?? randomUUID(), log),
    })
  sockets.mount(app)
  for (const a of definition.apis) {
    if (a.task || isWebSocketApi(a)) continue
    app.post(a.route, async (c) => {
      const answer = await new Promise<Answer>(
        (resolve, reject) => void pipeline.handle(honoExchange(c), a, c.get('requestId'), resolve).catch(reject),
      )
      // Plain header objects: a Headers instance costs node-server a sort and a copy.
      c.set('headed', true)
      if (answer.trace) c.set('trace', answer.trace)
      const body = answer.body instanceof StreamAnswer ? readableOf(answer.body) : answer.body
      return c.body(body as Uint8Array<ArrayBuffer> | string, answer.status as 200, answer.headers)
    })
    app.all(a.route, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${a.route} takes POST`)
    })
  }
  for (const p of INFRA_PATHS) {
    app.all(p, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${p} takes GET`)
    })
  }
  app.notFound((c) =>
    errorResponse(
      new BundleError('E_HTTP_NOT_FOUND', `no route for ${c.req.method} ${c.req.path}`),
      c.get('requestId') ?? randomUUID(),
      log,
    ),
  )
  app.onError((err, c) => {
    const allow: Record<string, string> =
      isBundleError(err) && err.code === 'E_HTTP_METHOD_NOT_ALLOWED'
        ? { allow: definition.apis.some((a) => a.route === c.req.path) ? 'POST' : 'GET' }
        : {}
    return errorResponse(err, c.get('requestId') ?? randomUUID(), log, allow)
  })

  let gpus: GpuMonitor | undefined
  // Off with CORS, whose headers only the hono middleware writes.
  const fast = options.corsOrigins?.length
    ? undefined
    : fastPath({
        apis: definition.apis.filter((a) => !isWebSocketApi(a)),
        pipeline,
        lifecycle,
        metrics,
        log,
        checkKey,
        logAccess,
      })
  return {
    app: app as unknown as Hono,
    definition,
    metrics,
    log,
    phase: () => lifecycle.phase,
    configure: () => {
      lifecycle.configure()
      gpuMetricsInterval()
    },
    ...(fast ? { fastPath: fast } : {}),
    start: async () => {
      // GPU figures only where nvidia-smi lists a GPU (elsewhere nothing is started); the first
      // sample is taken before the runners start, so /metrics has them once /readyz says ready.
      gpus ??= await startGpuMonitor(metrics.registry, definition.name, {
        placements: () =>
          [...definition.runners, ...repository.loaded()].flatMap((r): GpuPlacement[] => {
            const on = r.health().gpus
            return on ? [{ runner: r.name, gpus: on }] : []
          }),
        onError: (err) => log.warn({ err: (err as Error).message }, 'nvidia-smi could not be read for GPU metrics'),
      })
      await lifecycle.start()
    },
    drain: () => {
      lifecycle.drain()
      sockets.drain()
    },
    inFlight: () => pipeline.count() + sockets.count(),
    idle: async () => {
      await Promise.all([pipeline.idle(), sockets.idle()])
    },
    stop: () => {
      sockets.stop()
      gpus?.stop()
      return lifecycle.stop()
    },
    protocol,
    ...(sockets.apis().length ? { websocket: { maxMessageBytes: sockets.limits.maxMessageBytes } } : {}),
  }
}
