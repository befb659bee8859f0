import { hostname } from 'node:os'
import type { Logger } from 'pino'
import { BundleError, ignore } from '../errors/index.js'
import type { ModelMemory, OnnxRunner, RedisLink, WorkerHoldings } from '../runners/index.js'
import { servedModels } from './serve-models.js'

/** The queues' scope of the store's models: what `bundle serve --models P --runners remote` names them under. */
export const MODELS_SCOPE = 'models'

export interface ModelWorkerFlags {
  concurrency?: number | undefined
  memoryBudget?: string
  modelLoadConcurrency?: string
  evictionPolicy?: string
}

/**
 * `bundle worker --models PATTERN`: the store's models that PATTERN names, each taking batches from
 * its queue for API servers started with `bundle serve --models PATTERN --runners remote`. With
 * `--memory-budget` a model loads when a batch for it arrives (within the batch's deadline) and the
 * least recently used idle ones are evicted to keep this worker under the budget, as `bundle serve
 * --memory-budget` does; every second the worker reports what it holds, for the API servers'
 * repository index.
 */
export async function serveStoreModels(
  patterns: string,
  flags: ModelWorkerFlags,
  o: { link: RedisLink; log: Logger },
): Promise<{ names: string[]; close(): Promise<void> }> {
  const chosen = await servedModels(patterns)
  if (chosen.length === 0)
    throw new BundleError('E_CLI_USAGE', `--models "${patterns}": the store has no ONNX model to serve yet`)
  const {
    envOverrides,
    memorySettings,
    mergeOverrides,
    ModelMemory,
    OnnxRunner,
    queueName,
    reportHoldings,
    serveQueue,
  } = await import('../runners/index.js')
  const budget = memorySettings({ flags, env: process.env })
  const memory = budget && new ModelMemory({ ...budget, models: chosen.length, log: o.log })
  const runners: OnnxRunner[] = []
  const served: { close(): Promise<void> }[] = []
  let unreport: (() => Promise<void>) | undefined
  const close = async () => {
    const why = 'shutting down: what cannot close or stop goes with the process'
    await unreport?.()
    await Promise.all(served.map((s) => s.close().catch(ignore(why))))
    await Promise.all(runners.map((r) => r.stop().catch(ignore(why))))
    await memory?.stop().catch(ignore(why))
  }
  try {
    await memory?.start()
    let firstFailure: unknown
    for (const m of chosen) {
      const r = new OnnxRunner(m.tag, { name: m.name })
      r.configure(mergeOverrides({}, envOverrides(r.name)))
      r.attachLog(o.log)
      if (memory) r.useMemoryBudget(memory.cache, memory.host)
      try {
        await r.start()
      } catch (err) {
        // One model that fails (or is refused by --trust) leaves the others serving, as bundle serve --models does.
        firstFailure ??= err
        o.log.error({ model: m.name, err: (err as Error).message }, `model ${m.name}: ${(err as Error).message}`)
        await r.stop().catch(ignore('it never started: its failure is what the log says'))
        continue
      }
      runners.push(r)
      served.push(
        await serveQueue({
          link: o.link,
          queue: queueName(MODELS_SCOPE, r.name),
          runner: { name: r.name, execute: (m, a, t, d) => r.execute(m, a, t, d), digest: () => r.digest() },
          // Under a budget the model opens in the shared hosts: as many batches at once as there are hosts.
          concurrency: flags.concurrency ?? (budget ? (budget.hosts ?? 2) : r.health().workers || 1),
        }),
      )
    }
    if (runners.length === 0) throw firstFailure
    const id = `${hostname()}:${process.pid}`
    unreport = reportHoldings(o.link, MODELS_SCOPE, id, () => holdingsNow(runners, memory))
  } catch (err) {
    // A worker that cannot serve everything it was asked to exits, so an orchestrator restarts it.
    await close()
    throw err
  }
  if (memory)
    o.log.info(
      { models: chosen.length, capacityBytes: memory.cache.capacity, fixedBytes: memory.fixedBytes },
      `${chosen.length} models available under the memory budget; each loads when a batch for it arrives`,
    )
  return { names: runners.map((r) => r.name), close }
}

/** What this worker holds now: under a budget the cache's loaded models, else every model it started. */
function holdingsNow(runners: readonly OnnxRunner[], memory: ModelMemory | undefined): Omit<WorkerHoldings, 'worker'> {
  if (memory === undefined)
    return { models: runners.filter((r) => r.health().loaded).map((r) => ({ name: r.name, state: 'loaded' })) }
  const cache = memory.cache
  return {
    capacityBytes: cache.capacity,
    usedBytes: cache.used(),
    loads: cache.loads,
    evictions: cache.evictions,
    models: cache
      .rows()
      .filter((r) => r.state !== 'unloaded')
      .map((r) => ({
        name: r.name,
        state: r.state,
        ...(r.bytes !== undefined ? { bytes: r.bytes } : {}),
        ...(r.lastUsedAt !== undefined ? { lastUsedAt: r.lastUsedAt } : {}),
      })),
  }
}
