import { Registry, collectDefaultMetrics } from 'prom-client'
import { CounterFamily, GaugeFamily, HistogramFamily, type CounterSeries } from '../../runners/index.js'

// Statuses an API can answer with; their series exist from the first scrape so rate() and
// error-ratio queries work before the first error happens.
const KNOWN_STATUSES = [200, 400, 401, 413, 415, 429, 500, 503, 504]

/** Request latency buckets in seconds, shared by HTTP and gRPC request histograms. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** Pre-bound series of one endpoint: no label hashing on the request path. */
export interface EndpointMetrics {
  begin(): void
  end(status: number, seconds: number): void
}

export interface ServerMetrics {
  registry: Registry
  endpoint(name: string): EndpointMetrics
}

/** One registry per server (not prom-client's global one), so several apps can live in one process. */
export function createMetrics(service: string, endpoints: readonly string[]): ServerMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  // prom-client names these gauges *_total, which Prometheus reserves for counters (promtool
  // check metrics fails on them); the process handle and resource counts stay available as
  // nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
    registry.removeSingleMetric(name)
  // Plain series (runners/series.ts): the request path updates numbers, the scrape reads them.
  const total = new CounterFamily('bundle_request_total', 'API requests by endpoint and HTTP status', registry)
  const duration = new HistogramFamily(
    'bundle_request_duration_seconds',
    'API request latency, from the first byte read to the response',
    registry,
    LATENCY_BUCKETS,
  )
  const inProgress = new GaugeFamily('bundle_request_in_progress', 'API requests being handled now', registry)
  const bound = new Map<string, EndpointMetrics>()
  for (const endpoint of endpoints) {
    const byStatus = new Map<number, CounterSeries>()
    const counter = (status: number) => {
      let c = byStatus.get(status)
      if (c === undefined) byStatus.set(status, (c = total.labels({ service, endpoint, status: String(status) })))
      return c
    }
    for (const status of KNOWN_STATUSES) counter(status)
    const hist = duration.labels({ service, endpoint })
    const gauge = inProgress.labels({ service, endpoint })
    bound.set(endpoint, {
      begin: () => void gauge.value++,
      end(status, seconds) {
        gauge.value--
        counter(status).value++
        hist.observe(seconds)
      },
    })
  }
  return {
    registry,
    endpoint(name) {
      const m = bound.get(name)
      if (m === undefined) throw new Error(`no metrics for endpoint ${name}`)
      return m
    },
  }
}
