import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

// Statuses an API can answer with; their series exist from the first scrape so rate() and
// error-ratio queries work before the first error happens.
const KNOWN_STATUSES = ['200', '400', '401', '413', '415', '429', '500', '503', '504']

export interface ServerMetrics {
  registry: Registry
  observe(endpoint: string, status: number, seconds: number): void
  inProgress: Gauge<'service' | 'endpoint'>
}

/** One registry per server (not prom-client's global one), so several apps can live in one process. */
export function createMetrics(service: string, endpoints: readonly string[]): ServerMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const total = new Counter({ name: 'bundle_request_total', help: 'API requests by endpoint and HTTP status', labelNames: ['service', 'endpoint', 'status'], registers: [registry] })
  const duration = new Histogram({
    name: 'bundle_request_duration_seconds',
    help: 'API request latency, from the first byte read to the response',
    labelNames: ['service', 'endpoint'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  })
  const inProgress = new Gauge({ name: 'bundle_request_in_progress', help: 'API requests being handled now', labelNames: ['service', 'endpoint'], registers: [registry] })
  for (const endpoint of endpoints) {
    for (const status of KNOWN_STATUSES) total.inc({ service, endpoint, status }, 0)
    duration.zero({ service, endpoint })
    inProgress.set({ service, endpoint }, 0)
  }
  return {
    registry,
    inProgress,
    observe(endpoint, status, seconds) {
      total.inc({ service, endpoint, status: String(status) })
      duration.observe({ service, endpoint }, seconds)
    },
  }
}
