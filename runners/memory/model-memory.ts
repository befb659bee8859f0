import type { Registry } from 'prom-client'
import { BundleError } from '../../errors/index.js'
import { RUNNER_DEFAULTS } from '../defaults.js'
import { ModelHost } from '../hosting/model-host.js'
import type { RunnerLog } from '../runner.js'
import { cacheMetrics } from './metrics.js'
import { type CacheEvents, ModelCache } from './model-cache.js'
import { makePolicy, type PolicyName } from './policy.js'
import { mib } from './size.js'

/** `bundle serve --memory-budget` and its companions. */
export interface MemoryBudget {
  /** The whole server's resident memory (API process and model hosts) is kept under this. */
  budgetBytes: number
  /** Loads at once (--model-load-concurrency, default 2). */
  loadConcurrency?: number
  /** lru (default) or tinylfu. */
  policy?: PolicyName
  /** Model host processes (default: 2, or 1 on a one-core machine). */
  hosts?: number
}

/**
 * A server's models under a memory budget: the model hosts they open in, and the cache that loads
 * and evicts them. The cache's capacity is the budget less what the server holds before any model
 * (this process and the empty hosts), measured when it starts: that fixed part is the server's own.
 */
export class ModelMemory {
  readonly host: ModelHost
  private cacheNow: ModelCache | undefined
  /** The server's resident memory before any model: this process and the empty hosts. */
  fixedBytes = 0

  constructor(
    private readonly o: MemoryBudget & {
      models: number
      registry?: Registry
      log?: RunnerLog
    },
  ) {
    // A call past the runners' timeout replaces its host (and the host's models load again on demand).
    this.host = new ModelHost({ hosts: o.hosts, timeoutMs: RUNNER_DEFAULTS.timeoutMs })
  }

  get cache(): ModelCache {
    if (this.cacheNow === undefined) throw new Error('the model memory has not started')
    return this.cacheNow
  }

  async start(): Promise<void> {
    const events = this.events()
    await this.host.start()
    const hosts = await this.host.memory()
    this.fixedBytes = process.memoryUsage.rss() + hosts.reduce((n, h) => n + h.rss, 0)
    const capacity = this.o.budgetBytes - this.fixedBytes
    if (capacity <= 0) {
      await this.host.stop()
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `--memory-budget ${mib(this.o.budgetBytes)} is less than the server holds before any model ` +
          `(${mib(this.fixedBytes)}: this process and ${hosts.length} model hosts); give it more`,
      )
    }
    this.cacheNow = new ModelCache({
      capacity,
      policy: makePolicy(this.o.policy ?? 'lru', this.o.models),
      concurrency: this.o.loadConcurrency ?? 2,
      events,
    })
  }

  /** Loads and evictions go to /metrics and, at debug level, one log line each (bench:models reads them). */
  private events(): CacheEvents {
    const metrics = this.o.registry ? cacheMetrics(this.o.registry, () => this.cacheNow) : undefined
    const log = this.o.log
    return {
      loaded(model, seconds, bytes, fileBytes) {
        metrics?.loaded?.(model, seconds, bytes, fileBytes)
        log?.debug?.({ model, ms: Math.round(seconds * 1000), bytes, fileBytes }, `model ${model} loaded`)
      },
      evicted(model, bytes) {
        metrics?.evicted?.(model, bytes)
        log?.debug?.({ model, bytes }, `model ${model} evicted`)
      },
      failed(model, err) {
        log?.warn({ model, err: (err as Error).message }, `model ${model}: ${(err as Error).message}`)
      },
    }
  }

  stop(): Promise<void> {
    return this.host.stop()
  }
}
