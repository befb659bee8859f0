import type { IncomingMessage, ServerResponse } from 'node:http'
import { Hono } from 'hono'
import type { Logger } from 'pino'
import {
  type GpuMonitor,
  type GpuPlacement,
  type MemoryBudget,
  type RedisLink,
  type RunnerOverrides,
  startGpuMonitor,
  gpuMetricsInterval,
} from '../../runners/index.js'
import type { ServiceDefinition } from '../service/definition.js'
import type { TrustedKey } from '../../store/index.js'
import { type AppParts, appParts, type ServerHono } from './app-parts.js'
import { answerError, errorHandling, keyGate, partsOf, protocolOf, requestIds } from './app-routes.js'
import { fastPath } from './fast-path.js'
import type { Phase } from './lifecycle.js'
import { grpcPart } from './grpc/part.js'
import { mountParts, type PortPart, RouteIndex } from './part.js'
import type { RouteSpec } from '../route-spec.js'
import type { ServerMetrics } from './metrics.js'
import type { MetricsCompat } from './triton-metrics.js'
import { isWebSocketApi, type WsLimits } from './websocket/routes.js'
import type { ServedModel } from './v2/repository.js'
import type { V2Options } from './v2/routes.js'

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
  /**
   * Serve the Open Inference Protocol over gRPC on this port too (0 picks a free one), on the
   * same host. Default: off.
   */
  grpcPort?: number
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
  /**
   * `bundle serve --memory-budget`: the `models` are available, not loaded; each loads on its first
   * request, and the least recently used idle ones are evicted to keep the server under the budget.
   */
  memory?: MemoryBudget
  /**
   * `bundle serve --trust`: every model is verified against these public keys (its signature and
   * every file) before a runner loads it; anything unsigned, signed by another key or changed is
   * refused. It is the process's policy: it holds for every model this process loads.
   */
  trust?: readonly TrustedKey[]
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
  /**
   * Every HTTP route the app mounted, as its parts declare them (`bundle serve --print-routes`
   * prints them): method, path, open or keyed, what it is.
   */
  readonly routes: readonly RouteSpec[]
  /** The parts on ports of their own (gRPC with `grpcPort`): serve() opens them after the HTTP port. */
  readonly ports: readonly PortPart[]
  /** Present when the service has WebSocket routes: serve() attaches a WebSocket server with this message cap. */
  readonly websocket?: { maxMessageBytes: number }
}

/** The models, readiness, limits and key both transports of the Open Inference Protocol use. */
export interface Protocol extends V2Options {
  checkKey?: (authorization: string | undefined) => void
}

/**
 * Builds the hono app for a service. HTTP tests call `app.request()`; `serve()` puts it on a
 * socket. Every API request goes: auth → readiness → media type → body limit (no concurrency
 * slot is held while a body arrives) → concurrency → decode/validate → method (with timeout) →
 * encode, and ends in exactly one response.
 */
export function createServiceApp(definition: ServiceDefinition, options: AppOptions = {}): ServiceApp {
  const p = appParts(definition, options)
  const app: ServerHono = new Hono()
  const protocol = protocolOf(p)
  const parts = partsOf(p, protocol)
  requestIds(app, p)
  keyGate(app, p, new RouteIndex(parts.flatMap((part) => part.routes)), parts)
  const ports =
    options.grpcPort === undefined
      ? []
      : [grpcPart({ ...protocol, port: options.grpcPort, registry: p.metrics.registry, service: definition.name })]
  const routes = [...mountParts(app, parts, answerError(p)), ...ports.flatMap((part) => part.routes)]
  errorHandling(app, p)
  // Off with CORS, whose headers only the hono middleware writes.
  const fast = options.corsOrigins?.length
    ? undefined
    : fastPath({
        apis: definition.apis.filter((a) => !isWebSocketApi(a)),
        pipeline: p.pipeline,
        lifecycle: p.lifecycle,
        metrics: p.metrics,
        log: p.log,
        checkKey: p.checkKey,
        logAccess: p.logAccess,
      })
  return {
    ...lifecycleOf(p),
    app: app as unknown as Hono,
    ...(fast ? { fastPath: fast } : {}),
    protocol,
    routes,
    ports,
  }
}

/** The app's life as serve() drives it: configure, start (GPU metrics first), drain, wait, stop. */
function lifecycleOf(p: AppParts): Omit<ServiceApp, 'app' | 'fastPath' | 'protocol' | 'routes' | 'ports'> {
  const { definition, metrics, log, lifecycle, repository, pipeline, sockets } = p
  let gpus: GpuMonitor | undefined
  return {
    definition,
    metrics,
    log,
    phase: () => lifecycle.phase,
    configure: () => {
      lifecycle.configure()
      gpuMetricsInterval()
    },
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
    ...(sockets.apis().length ? { websocket: { maxMessageBytes: sockets.limits.maxMessageBytes } } : {}),
  }
}
