import type { Hono } from 'hono'
import pino, { type Logger } from 'pino'
import {
  ModelMemory,
  RemoteHoldings,
  RunnerMetrics,
  type Runner,
  ortSeverity,
  setModelTrust,
} from '../../runners/index.js'
import type { ServiceDefinition } from '../service/definition.js'
import { type AccessLog, accessLog } from './access-log.js'
import { keyChecker } from './auth.js'
import { DEFAULT_MAX_BODY_BYTES } from './body.js'
import { Deadlines } from './deadlines.js'
import { Lifecycle } from './lifecycle.js'
import { LogSink } from './log-sink.js'
import { createMetrics, type ServerMetrics } from './metrics.js'
import { metricsCompat, registerTritonMetrics } from './triton-metrics.js'
import { RequestPipeline } from './pipeline.js'
import { traceFields } from './request-span.js'
import { TaskService } from './tasks/queue.js'
import { WebSocketRoutes, wsLimits } from './websocket/routes.js'
import { ModelRepository } from './v2/repository.js'
import type { AppOptions } from './app.js'

/** The hono app with the variables the server's middleware sets on each request. */
export type ServerHono = Hono<{
  Variables: { requestId: string; headed?: boolean; trace?: { traceId: string; spanId: string } }
}>

/** What a service app is made of; the route steps (app-routes.ts) mount onto these. */
export interface AppParts {
  definition: ServiceDefinition
  options: AppOptions
  log: Logger
  sink: LogSink | undefined
  logAccess: AccessLog | undefined
  maxBodyBytes: number
  metrics: ServerMetrics
  repository: ModelRepository
  tasks: TaskService | undefined
  lifecycle: Lifecycle
  pipeline: RequestPipeline
  sockets: WebSocketRoutes
  checkKey: ((authorization: string | undefined) => void) | undefined
}

/**
 * The service's logger: buffered stdout (64 KiB or 250 ms, whichever first; see LogSink) — a
 * write(2) per access line costs more than handling a small request; serve() flushes after
 * lifecycle lines and at shutdown. Lines logged inside a traced request carry its trace_id and span_id.
 */
function appLog(definition: ServiceDefinition, options: AppOptions): Pick<AppParts, 'log' | 'sink' | 'logAccess'> {
  const sink = options.logger ? undefined : new LogSink(1)
  const log =
    options.logger ??
    pino(
      { level: process.env.BUNDLE_LOG_LEVEL ?? 'info', base: { service: definition.name }, mixin: traceFields },
      sink,
    )
  const accessLogOn = options.accessLog ?? process.env.BUNDLE_ACCESS_LOG !== '0'
  return { log, sink, logAccess: accessLogOn ? accessLog(log, sink, definition.name) : undefined }
}

/** The model repository (/v2) over the service's runners, every runner reporting to the server's metrics and log. */
function repositoryOf(
  definition: ServiceDefinition,
  options: AppOptions,
  metrics: ServerMetrics,
  log: Logger,
): ModelRepository {
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
  // Models under a memory budget share model hosts; their loads and evictions go to /metrics.
  const memory =
    options.memory &&
    new ModelMemory({ ...options.memory, models: options.models?.length ?? 0, registry: metrics.registry, log })
  // Remote runners: the models --models names run on `bundle worker --models`, which report what they
  // hold. (Without --models a model loaded at run time runs in this server, as before.)
  const remote = options.remote &&
    options.servable && {
      ...options.remote,
      holdings: new RemoteHoldings(options.remote.link, options.remote.scope),
    }
  const repository = new ModelRepository(definition.runners, {
    ...(options.storeHome ? { home: options.storeHome } : {}),
    ...(options.servable ? { servable: options.servable } : {}),
    attach,
    memory,
    remote,
  })
  return repository
}

/** Builds every part of a service app; settings that are wrong fail here with one coded line. */
export function appParts(definition: ServiceDefinition, options: AppOptions): AppParts {
  const compat = metricsCompat(options.metricsCompat)
  // The trust policy holds for every model this process loads (runners/onnx/trust.ts): each app
  // sets it, so an app without trust does not inherit another's.
  setModelTrust(options.trust)
  ortSeverity(undefined, process.env.BUNDLE_ORT_LOG_LEVEL)
  const { log, sink, logAccess } = appLog(definition, options)
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const metrics = createMetrics(
    definition.name,
    definition.apis.map((a) => a.name),
  )
  const repository = repositoryOf(definition, options, metrics, log)
  if (compat === 'triton') registerTritonMetrics(metrics.registry, () => repository.models())
  const taskApis = definition.apis.filter((a) => a.task)
  const redis = options.redis ?? options.remote?.link
  const scope = options.remote?.scope ?? options.scope ?? definition.name
  const tasks = taskApis.length && redis ? new TaskService({ link: redis, scope, apis: taskApis, log }) : undefined
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
  const serverTiming = options.serverTiming ?? process.env.BUNDLE_SERVER_TIMING === '1'
  const deadlines = new Deadlines(definition.traffic.timeoutMs)
  const pipeline = new RequestPipeline({ definition, lifecycle, metrics, log, deadlines, maxBodyBytes, serverTiming })
  const limits = wsLimits(options.websocket, definition.traffic.timeoutMs)
  const sockets = new WebSocketRoutes({ definition, lifecycle, log, registry: metrics.registry, limits })
  const checkKey = options.apiKey ? keyChecker(options.apiKey) : undefined
  return {
    definition,
    options,
    log,
    sink,
    logAccess,
    maxBodyBytes,
    metrics,
    repository,
    tasks,
    lifecycle,
    pipeline,
    sockets,
    checkKey,
  }
}
