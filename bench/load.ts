import { Agent, request } from 'node:http'

export interface LoadOptions {
  url: string
  method?: string
  headers?: Record<string, string>
  body?: Uint8Array | string
  /** Requests kept in flight at once (closed loop, like perf_analyzer's concurrency mode). */
  concurrency: number
  warmupMs: number
  durationMs: number
}

export interface LoadResult {
  concurrency: number
  requests: number
  errors: number
  statuses: Record<string, number>
  /** All answers per second, errors included. */
  rps: number
  /** Successful (2xx) answers per second: the throughput that counts. */
  okRps: number
  p50: number
  p90: number
  p99: number
  mean: number
  /** Latency percentiles of successful answers only (the latency bound is about these). */
  okP50: number
  okP99: number
}

const pct = (sorted: number[], p: number): number =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN

/**
 * A fixed-concurrency load generator: `concurrency` loops each send a request, wait for the
 * whole response, and send the next, over keep-alive connections. Only requests that start and
 * end inside the timed window (after warm-up) count. Latencies are in milliseconds.
 */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: o.concurrency })
  const target = new URL(o.url)
  const body = typeof o.body === 'string' ? Buffer.from(o.body) : o.body
  const headers = { ...(o.headers ?? {}), ...(body ? { 'content-length': String(body.byteLength) } : {}) }
  const start = performance.now()
  const windowStart = start + o.warmupMs
  const windowEnd = windowStart + o.durationMs
  const latencies: number[] = []
  const okLatencies: number[] = []
  const statuses: Record<string, number> = {}
  let errors = 0

  const once = (): Promise<number> =>
    new Promise((resolve) => {
      const req = request(
        {
          hostname: target.hostname,
          port: target.port,
          path: target.pathname + target.search,
          method: o.method ?? 'POST',
          headers,
          agent,
        },
        (res) => {
          res.on('data', () => undefined)
          res.on('end', () => resolve(res.statusCode ?? 0))
        },
      )
      req.on('error', () => resolve(0))
      req.end(body)
    })

  const loop = async (): Promise<void> => {
    while (performance.now() < windowEnd) {
      const t0 = performance.now()
      const status = await once()
      const t1 = performance.now()
      if (t0 >= windowStart && t1 <= windowEnd) {
        latencies.push(t1 - t0)
        statuses[status] = (statuses[status] ?? 0) + 1
        if (status < 200 || status >= 300) errors++
        else okLatencies.push(t1 - t0)
      }
    }
  }
  await Promise.all(Array.from({ length: o.concurrency }, loop))
  agent.destroy()
  const sorted = latencies.sort((a, b) => a - b)
  return {
    concurrency: o.concurrency,
    requests: sorted.length,
    errors,
    statuses,
    rps: sorted.length / (o.durationMs / 1000),
    okRps: (sorted.length - errors) / (o.durationMs / 1000),
    p50: pct(sorted, 50),
    p90: pct(sorted, 90),
    p99: pct(sorted, 99),
    mean: sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1),
    okP50: pct(
      okLatencies.sort((a, b) => a - b),
      50,
    ),
    okP99: pct(okLatencies, 99),
  }
}
