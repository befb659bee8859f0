import { Command } from 'commander'
import { BundleError, ignore } from '../errors/index.js'
import { redisUrl, resolveEntry } from './entry.js'
import { followParentUnderNpm } from './follow-parent.js'
import { trustedKeys } from './signing.js'

const collect = (v: string, prev: string[]) => [...prev, v]

/**
 * `bundle worker ENTRY --redis URL`: runs a service's runners on this machine for API servers
 * started with `bundle serve ENTRY --runners remote`. The service's start-up hooks run first
 * (they bring models into a fresh store), then each runner starts its own worker
 * processes (same options, GPU placement included) and takes batches from its queue. Any number
 * of these may run, join and leave; SIGTERM finishes the batches held, then exits.
 */
export function workerCommand(): Command {
  return new Command('worker')
    .description(
      'run the runners of a service or bundle for remote API servers (bundle serve --runners remote), fed through ' +
        'Redis',
    )
    .argument(
      '[entry]',
      'path/to/service.ts[:ClassName], a project directory holding bundle.yaml, a stored bundle (name[:version]) ' +
        'or a bundle directory; or none, with --models',
    )
    .option(
      '--models <patterns>',
      "the store's models to run for `bundle serve --models PATTERNS --runners remote` (names, globs such as " +
        "'ocr-*', '*'; default $BUNDLE_MODELS), instead of a service's runners",
    )
    .option(
      '--memory-budget <size>',
      'with --models: each model loads when a batch for it arrives; the least recently used idle ones are evicted ' +
        'to keep this worker under SIZE (e.g. 1.5GiB; default $BUNDLE_MEMORY_BUDGET; docs/memory.md)',
    )
    .option(
      '--trust <file>',
      'verify every model against this public key (PEM; repeatable) before it loads (default $BUNDLE_TRUST)',
      collect,
      [],
    )
    .option('--model-load-concurrency <n>', 'with --memory-budget: models loading at once (default 2)')
    .option('--eviction-policy <policy>', 'with --memory-budget: lru (default) or tinylfu')
    .option('--runner <name>', 'run only this runner (repeatable; default: all of them)', collect, [])
    .option('--concurrency <n>', "batches taken at once per runner (default: the runner's worker processes)")
    .option('--redis <url>', 'Redis the API servers use (default $BUNDLE_REDIS_URL)')
    .option(
      '--otel-endpoint <url>',
      "send this worker's OpenTelemetry spans over OTLP/HTTP to this collector (default $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    .action(runWorker)
}

interface WorkerFlags {
  runner: string[]
  concurrency?: string
  redis?: string
  otelEndpoint?: string
  models?: string
  memoryBudget?: string
  modelLoadConcurrency?: string
  evictionPolicy?: string
  trust: string[]
}

type Runners = Awaited<ReturnType<typeof resolveEntry>>['definition']['runners']

/** The runners to serve: those named by --runner (each must exist), else every one that can run remote batches. */
function chosenRunners(definition: { name: string; runners: Runners }, names: string[]): Runners {
  // Runners that can run batches for others (not ensembles: their steps' runners do).
  const runnable = definition.runners.filter((r) => r.remote !== undefined)
  for (const name of names) {
    if (!runnable.some((r) => r.name === name))
      throw new BundleError(
        'E_CLI_USAGE',
        `--runner ${name}: ${definition.name} has no such runner (runners: ` +
          `${runnable.map((r) => r.name).join(', ') || 'none'})`,
      )
  }
  const chosen = names.length ? runnable.filter((r) => names.includes(r.name)) : runnable
  if (chosen.length === 0) throw new BundleError('E_CLI_USAGE', `${definition.name} has no runners to serve`)
  return chosen
}

/** Batches taken at once per runner, when --concurrency gives it. */
function concurrencyFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1)
    throw new BundleError('E_CLI_USAGE', `--concurrency "${value}" must be a whole number ≥ 1`)
  return n
}

async function runWorker(entry: string | undefined, opts: WorkerFlags): Promise<void> {
  const url = redisUrl(opts.redis, 'bundle worker')
  const concurrency = concurrencyFlag(opts.concurrency)
  const models = opts.models ?? (process.env.BUNDLE_MODELS || undefined)
  // The trust policy is the process's: set before any runner loads a model.
  const trust = await trustedKeys(opts.trust)
  if (trust) (await import('../runners/index.js')).setModelTrust(trust)
  if (entry === undefined) {
    if (models === undefined)
      throw new BundleError(
        'E_CLI_USAGE',
        'bundle worker needs what to run: a service (path/to/service.ts, a project directory, a bundle tag) or ' +
          "--models NAMES for `bundle serve --models NAMES --runners remote` (e.g. --models '*')",
      )
    if (opts.runner.length)
      throw new BundleError('E_CLI_USAGE', '--runner picks runners of a service; with --models name the models instead')
    return runModelWorker(models, { ...opts, concurrency }, url)
  }
  if (opts.models !== undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      "--models runs the store's models, without a service: drop ENTRY (or --models, to run the service's runners)",
    )
  if (opts.memoryBudget !== undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      '--memory-budget bounds the models --models names: add --models, without ENTRY',
    )
  const { definition, scope } = await resolveEntry(entry, trust)
  const chosen = chosenRunners(definition, opts.runner)
  const { RedisLink, startTracing, stopTracing, tracingSettings } = await import('../runners/index.js')
  const tracing = tracingSettings({ endpoint: opts.otelEndpoint, serviceName: definition.name })
  const { default: pino } = await import('pino')
  const log = pino({
    level: process.env.BUNDLE_LOG_LEVEL ?? 'info',
    base: { service: definition.name, role: 'worker' },
  })
  const link = new RedisLink(url)
  const served: { close(): Promise<void> }[] = []
  const closeAll = async () => {
    const why = 'shutting down: what cannot close or stop goes with the process'
    await Promise.all(served.map((s) => s.close().catch(ignore(why))))
    await Promise.all(chosen.map((r) => r.stop().catch(ignore(why))))
    await link.close()
    await stopTracing()
  }
  const stop = async (signal: string) => {
    const since = performance.now()
    log.info({ signal }, `${signal}: finishing the batches held, then exiting`)
    await closeAll()
    log.info({ ms: Math.round(performance.now() - since) }, 'worker stopped')
    log.flush()
    process.exit(0)
  }
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void stop(sig))
  followParentUnderNpm()
  try {
    // Before the runners start: their worker processes trace too, as children of this one's spans.
    if (tracing) await startTracing(tracing, { 'bundle.process': 'remote-worker' })
    // Start-up hooks prepare what the service needs, e.g. its models in a fresh store.
    const instance = definition.create()
    for (const hook of definition.onStartup) await (instance[hook] as () => unknown).call(instance)
    for (const r of chosen) served.push(await serveRunner(r, { scope, link, log, concurrency }))
  } catch (err) {
    // A worker that cannot serve everything it was asked to exits, so an orchestrator restarts it.
    await closeAll()
    throw err
  }
  log.info({ runners: chosen.map((r) => r.name), redis: link.shown }, 'worker ready')
}

/** Starts one runner's worker processes and takes batches from its queue. */
async function serveRunner(
  r: Runners[number],
  o: {
    scope: string
    link: InstanceType<typeof import('../runners/index.js').RedisLink>
    log: import('pino').Logger
    concurrency: number | undefined
  },
): Promise<{ close(): Promise<void> }> {
  const { envOverrides, mergeOverrides, queueName, serveQueue } = await import('../runners/index.js')
  const remote = r.remote!
  r.configure(mergeOverrides({}, envOverrides(r.name)))
  r.useRedis?.(o.link)
  r.attachLog?.(o.log) // its workers' output (onnxruntime's lines) becomes records of this log
  await r.start()
  const concurrency = o.concurrency ?? (r.health().workers || 1)
  const queue = queueName(o.scope, r.name)
  const served = await serveQueue({
    link: o.link,
    queue,
    runner: { name: r.name, execute: (m, a, t) => remote.execute(m, a, t), digest: () => remote.digest() },
    concurrency,
  })
  o.log.info({ runner: r.name, queue, concurrency }, 'serving remote batches')
  return served
}

/** `bundle worker --models PATTERNS`: the store's models, each on its queue, under a budget when one is set. */
async function runModelWorker(
  patterns: string,
  opts: Omit<WorkerFlags, 'concurrency'> & { concurrency: number | undefined },
  url: string,
): Promise<void> {
  const { RedisLink } = await import('../runners/index.js')
  const { serveStoreModels } = await import('./worker-models.js')
  const { default: pino } = await import('pino')
  const log = pino({ level: process.env.BUNDLE_LOG_LEVEL ?? 'info', base: { service: 'models', role: 'worker' } })
  const link = new RedisLink(url)
  let served: Awaited<ReturnType<typeof serveStoreModels>> | undefined
  const stop = async (signal: string) => {
    log.info({ signal }, `${signal}: finishing the batches held, then exiting`)
    await served?.close()
    await link.close()
    log.flush()
    process.exit(0)
  }
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void stop(sig))
  followParentUnderNpm()
  try {
    served = await serveStoreModels(patterns, opts, { link, log })
  } catch (err) {
    await link.close()
    throw err
  }
  log.info({ models: served.names.length, redis: link.shown }, 'worker ready')
}
