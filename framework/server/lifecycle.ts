import type { Logger } from 'pino'
import { BundleError, isBundleError, ignore } from '../../errors/index.js'
import {
  envOverrides,
  mergeOverrides,
  queueName,
  undeclaredRunners,
  type RedisLink,
  type RunnerOverrides,
} from '../../runners/index.js'
import type { ApiDefinition, ServiceDefinition } from '../service/definition.js'
import type { TaskService } from './tasks/queue.js'
import type { ModelRepository, ServedModel } from './v2/repository.js'

export type Phase = 'starting' | 'ready' | 'draining' | 'stopped' | 'failed'

export interface LifecycleOptions {
  definition: ServiceDefinition
  log: Logger
  runnerConfig?: Record<string, RunnerOverrides> | undefined
  redis?: RedisLink | undefined
  remote?: { link: RedisLink; scope: string; graceMs?: number } | undefined
  taskApis: readonly ApiDefinition[]
  tasks: TaskService | undefined
  repository: ModelRepository
  /** Store models to load once the service's runners run (`bundle serve --models`). */
  models: readonly ServedModel[]
}

/**
 * A service's life: configure (operator overrides, checked before a socket is opened), start
 * (instance, start-up hooks, runners, tasks), readiness, drain, and stop. The request pipeline
 * and the probes read its phase; nothing else changes it.
 */
export class Lifecycle {
  phase: Phase = 'starting'
  /** Why it is not serving: shown by /readyz, which is open to anyone. */
  reason = 'starting up'
  /** The object whose methods serve the APIs, once start() made it. */
  instance: Record<string, unknown> | undefined
  private starting: Promise<void> | undefined
  private configured = false

  constructor(private readonly o: LifecycleOptions) {}

  /** Why a started service cannot serve now: a runner, or the tasks' Redis. */
  notReady(): string | undefined {
    const r = this.o.definition.runners.find((x) => !x.ready())
    if (r !== undefined) {
      const why = r.notReadyReason()
      return `runner ${why ? `${r.name} (${why})` : r.name} is not ready`
    }
    const t = this.o.tasks?.notReadyReason()
    return t === undefined ? undefined : `tasks are not ready (${t})`
  }

  /** The error for a request that arrives while the service is not serving. */
  notServing(): BundleError {
    return new BundleError(
      'E_HTTP_NOT_READY',
      this.phase === 'starting' ? 'the service is still starting' : `the service is ${this.phase}`,
    )
  }

  configure(): void {
    if (this.configured) return
    const { definition, runnerConfig, taskApis, tasks } = this.o
    // Operators tune runners without touching code: config file, then environment.
    const names = new Set([...definition.runners.map((r) => r.name), ...this.o.models.map((m) => m.name)])
    for (const name of Object.keys(runnerConfig ?? {})) {
      if (!names.has(name))
        throw new BundleError(
          'E_SERVE_CONFIG_INVALID',
          `the config names runner "${name}", but this service has ${[...names].join(', ') || 'no runners'}`,
        )
    }
    const layers = definition.runners.map(
      (r) => [r, mergeOverrides({}, runnerConfig?.[r.name] ?? {}, envOverrides(r.name))] as const,
    )
    if (taskApis.length && tasks === undefined)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `${taskApis.map((a) => a.route).join(', ')} ${taskApis.length > 1 ? 'are tasks' : 'is a task'}, which live ` +
          `in Redis: serve with --redis redis://HOST:6379 (or BUNDLE_REDIS_URL)`,
      )
    // Every layer parsed before any runner changes: a bad variable leaves every runner as it was.
    for (const [r, overrides] of layers) r.configure(overrides)
    this.configured = true
  }

  start(): Promise<void> {
    this.starting ??= this.run()
    return this.starting
  }

  private async run(): Promise<void> {
    const { definition, log, tasks, remote } = this.o
    try {
      this.configure()
      const redis = this.o.redis ?? remote?.link
      if (redis) for (const r of definition.runners) r.useRedis?.(redis)
      if (remote)
        for (const r of definition.runners)
          r.remote?.useRemote({
            link: remote.link,
            queue: queueName(remote.scope, r.name),
            ...(remote.graceMs !== undefined ? { graceMs: remote.graceMs } : {}),
          })
      const instance = definition.create()
      this.instance = instance
      // Start-up can take a while (a first run imports models, workers warm up): each step is logged as it begins.
      for (const hook of definition.onStartup) {
        log.info({ hook }, `start-up hook ${hook}`)
        await (instance[hook] as () => unknown).call(instance)
      }
      // Ensembles check their steps against the models, so they start after every runner.
      for (const r of definition.runners)
        if (r.kind !== 'ensemble') {
          log.info({ runner: r.name, kind: r.kind }, `starting runner ${r.name} (its workers load and warm up)`)
          await r.start()
        }
      for (const r of definition.runners) if (r.kind === 'ensemble') await r.start()
      // The model hosts start, and the server's own memory is measured, before any model comes in.
      await this.o.repository.memory?.start()
      await this.o.repository.holdings?.start()
      await this.loadModels()
      await tasks?.start(instance)
      // A SIGTERM during start-up wins: the service never turns ready.
      if (this.phase !== 'starting') return
      this.phase = 'ready'
      this.reason = ''
      if (definition.runners.length)
        log.info(
          { runners: Object.fromEntries(definition.runners.map((r) => [r.name, r.effectiveConfig()])) },
          'runner configuration',
        )
      // A runner the service's code uses but does not declare is never started: say so now,
      // not on the first request that calls it.
      for (const r of undeclaredRunners([...definition.runners, ...this.o.repository.runners()])) {
        log.warn(
          { runner: r.name },
          `runner ${r.name} was created but is not in the runners of service ${definition.name}, so it was not ` +
            `started and every call to it fails with E_RUNNER_NOT_DECLARED; add it: @service({ runners: [...] })`,
        )
      }
      log.info({ apis: definition.apis.map((a) => a.route) }, 'service ready')
    } catch (err) {
      this.phase = 'failed'
      // /readyz is open to anyone: the code, not the message (which may name files); serve() logs it all.
      this.reason = `start-up failed${isBundleError(err) ? ` (${err.code})` : ''}; the server log has the details`
      throw err
    }
  }

  /** `bundle serve --models`: each loads, or is logged and stays UNAVAILABLE with why; the others serve. */
  private async loadModels(): Promise<void> {
    const { models, repository, log, definition } = this.o
    if (models.length === 0) return
    const taken = models.find((m) => definition.runners.some((r) => r.name === m.name))
    if (taken)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `--models names ${taken.name}, which is also a runner of service ${definition.name}; the service serves it`,
      )
    const started = performance.now()
    let failed = 0
    // Each model takes its settings as a runner would: config file, then environment.
    const settings = (name: string) => mergeOverrides({}, this.o.runnerConfig?.[name] ?? {}, envOverrides(name))
    await repository.preload(
      models.map((m) => ({ ...m, config: settings(m.name) })),
      (name, err) => {
        failed++
        log.error({ model: name, err: (err as Error).message }, (err as Error).message)
      },
    )
    const memory = repository.memory
    if (memory)
      log.info(
        {
          models: models.length,
          failed,
          budgetBytes: memory.cache.capacity + memory.fixedBytes,
          fixedBytes: memory.fixedBytes,
          capacityBytes: memory.cache.capacity,
        },
        `${models.length - failed} of ${models.length} models available under the memory budget; each loads on its ` +
          'first request',
      )
    else
      log.info(
        { models: models.length, failed, ms: Math.round(performance.now() - started) },
        `loaded ${models.length - failed} of ${models.length} models`,
      )
  }

  drain(): void {
    if (this.phase === 'ready' || this.phase === 'starting') {
      this.phase = 'draining'
      this.reason = 'shutting down'
    }
  }

  async stop(): Promise<void> {
    const { definition, log, tasks, repository } = this.o
    if (this.phase !== 'failed') this.phase = 'draining'
    this.reason = 'shutting down'
    // Shutdown hooks run after start-up hooks, never beside them.
    await this.starting?.catch(ignore('a failed start-up was reported when it failed'))
    // Every hook and runner gets its turn even if one fails; the first failure is reported.
    let failure: unknown
    const attempt = async (what: string, fn: () => unknown): Promise<void> => {
      try {
        await fn()
      } catch (err) {
        log.error({ err }, `${what} failed during shutdown`)
        failure ??= err
      }
    }
    // Tasks stop first: they may still use what the shutdown hooks release.
    await attempt('tasks', () => tasks?.stop())
    const instance = this.instance
    if (instance)
      for (const hook of definition.onShutdown)
        await attempt(`shutdown hook ${hook}`, () => (instance[hook] as () => unknown).call(instance))
    for (const r of definition.runners) await attempt(`runner ${r.name}`, () => r.stop())
    await attempt('models loaded at run time', () => repository.stopAll())
    await attempt('model hosts', () => repository.memory?.stop())
    this.phase = 'stopped'
    if (failure !== undefined) throw failure
  }
}
