import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { CacheEvents, ModelCache } from './model-cache.js'

const LOAD_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 1, 2.5, 5, 10, 30]

/**
 * The model cache on /metrics: loads, evictions and load time by model, the bytes each loaded model
 * holds, and the cache's used and capacity bytes (read at scrape time). Loads and evictions are
 * rare next to requests: prom-client's own metrics are cheap enough here.
 */
export function cacheMetrics(registry: Registry, cache: () => ModelCache | undefined): CacheEvents {
  const loads = new Counter({
    name: 'bundle_model_loads_total',
    help: 'Models loaded on demand or by request, under the memory budget (--memory-budget)',
    labelNames: ['model'],
    registers: [registry],
  })
  const evictions = new Counter({
    name: 'bundle_model_evictions_total',
    help: 'Models evicted to make room for another under the memory budget',
    labelNames: ['model'],
    registers: [registry],
  })
  const seconds = new Histogram({
    name: 'bundle_model_load_seconds',
    help:
      'Time to load a model under the memory budget, from the load starting to the model serving (a turn, room ' +
      'made, opened, warmed)',
    buckets: LOAD_BUCKETS,
    registers: [registry],
  })
  new Gauge({
    name: 'bundle_model_bytes',
    help: 'Resident memory a model costs, as its last load measured it (models never loaded yet have no series)',
    labelNames: ['model'],
    registers: [registry],
    collect() {
      this.reset()
      for (const r of cache()?.rows() ?? []) if (!r.predicted) this.set({ model: r.name }, r.bytes ?? 0)
    },
  })
  new Gauge({
    name: 'bundle_model_cache_bytes',
    help:
      'The model cache: bytes its loaded models hold (used) and may hold (capacity: the budget less the ' +
      'server’s own memory)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const c = cache()
      if (c === undefined) return
      this.set({ state: 'used' }, c.used())
      this.set({ state: 'capacity' }, c.capacity)
    },
  })
  return {
    loaded(name, s) {
      loads.inc({ model: name })
      seconds.observe(s)
    },
    evicted(name) {
      evictions.inc({ model: name })
    },
  }
}
