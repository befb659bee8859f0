/** What one request came to: a 2xx (or gRPC OK), or the code it failed with. */
export interface Outcome {
  ok: boolean
  /** `200`; an error's code (`E_RUNNER_OVERLOADED`, or `503` / `UNAVAILABLE` without one). */
  code: string
  /** A refusal the server made on purpose (shed, over a limit, not ready): not a failure. */
  refused?: boolean
  /** What the server said of an error, when it said something. */
  message?: string
}

/** One measurement window. */
export interface WindowStats {
  /** How long the window lasted. */
  seconds: number
  /** Requests answered within the window. */
  answered: number
  /** 2xx answers per second: goodput, never counting refusals. */
  goodput: number
  /** All answers per second, refusals and errors included. */
  throughput: number
  refused: number
  errors: number
  /** Answers by code, refusals and errors alike. */
  codes: Record<string, number>
  /** Latency of the successful answers, ms. */
  p50: number
  p90: number
  p95: number
  p99: number
  mean: number
}

/** The q-quantile of sorted values (nearest rank), 0 for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

/** A window's figures from what was answered in it (`ms` long). Latencies count successes only. */
export function summarize(answers: readonly { outcome: Outcome; ms: number }[], ms: number): WindowStats {
  const lat = answers
    .filter((a) => a.outcome.ok)
    .map((a) => a.ms)
    .sort((a, b) => a - b)
  const codes: Record<string, number> = {}
  let refused = 0
  let errors = 0
  for (const { outcome } of answers) {
    codes[outcome.code] = (codes[outcome.code] ?? 0) + 1
    if (!outcome.ok) outcome.refused ? refused++ : errors++
  }
  const seconds = ms / 1000
  return {
    seconds,
    answered: answers.length,
    goodput: lat.length / seconds,
    throughput: answers.length / seconds,
    refused,
    errors,
    codes,
    p50: quantile(lat, 0.5),
    p90: quantile(lat, 0.9),
    p95: quantile(lat, 0.95),
    p99: quantile(lat, 0.99),
    mean: lat.length ? lat.reduce((s, v) => s + v, 0) / lat.length : 0,
  }
}

/**
 * perf_analyzer's stability rule: the last `count` windows agree within `tolerance` (of their
 * mean) in goodput and in p99. A step with no successes is never stable on latency grounds:
 * it is stable when the goodput (zero) is.
 */
export function isStable(windows: readonly WindowStats[], count = 3, tolerance = 0.1): boolean {
  if (windows.length < count) return false
  const last = windows.slice(-count)
  const within = (values: number[]) => {
    const mean = values.reduce((s, v) => s + v, 0) / values.length
    if (mean === 0) return values.every((v) => v === 0)
    return values.every((v) => Math.abs(v - mean) <= tolerance * mean)
  }
  return within(last.map((w) => w.goodput)) && within(last.map((w) => w.p99))
}
