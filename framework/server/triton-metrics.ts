import type { Metric, Registry } from 'prom-client'
import { BundleError } from '../../errors/index.js'
import { FAILURE_REASONS, type InferenceModel, type RunnerStats } from '../../runners/index.js'

// Triton's inference metrics (docs/user_guide/metrics.md of triton-inference-server), under its
// names, types, labels and units, so dashboards and alerts written for Triton read this server.
// They are read at scrape time from the numbers the /v2 statistics extension reports (RunnerStats):
// one measurement, two ways to read it.

/** Metric sets `--metrics-compat` adds next to the bundle_* series. */
export type MetricsCompat = 'triton'

/**
 * `--metrics-compat` (or BUNDLE_METRICS_COMPAT when the option is absent): `triton`, or `none`
 * / empty for nothing more. Anything else is refused before the server opens a socket.
 */
export function metricsCompat(
  value: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): MetricsCompat | undefined {
  const raw = value ?? env.BUNDLE_METRICS_COMPAT
  const v = raw?.trim().toLowerCase()
  if (v === undefined || v === '' || v === 'none') return undefined
  if (v === 'triton') return v
  throw new BundleError(
    'E_SERVE_CONFIG_INVALID',
    `${value === undefined ? 'BUNDLE_METRICS_COMPAT' : '--metrics-compat'} ${JSON.stringify(raw)} is not a ` +
      "metrics set this server exports: use triton (Triton's nv_inference_* series) or none",
  )
}

interface Sample {
  labels: Record<string, string>
  value: number
}

/** A family whose samples are read when Prometheus scrapes (prom-client's registry takes any get/reset object). */
class ScrapedFamily {
  readonly aggregator = 'sum'
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge',
    private readonly read: () => Sample[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric)
  }

  get() {
    const { name, help, type, aggregator } = this
    return Promise.resolve({ name, help, type, aggregator, values: this.read() })
  }

  /** Nothing to reset: the numbers belong to the models' statistics. */
  reset(): void {}
}

const us = (ns: number) => ns / 1000

/** Per model version: [name, help, what to read] of Triton's per-model counters (µs where timed). */
const COUNTERS: readonly (readonly [string, string, (s: RunnerStats) => number])[] = [
  ['nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (s) => s.success.count],
  [
    'nv_inference_count',
    'Number of inferences performed (a batch of n counts n; does not include cached requests)',
    (s) => s.inferenceCount,
  ],
  [
    'nv_inference_exec_count',
    'Number of model executions (batches) performed (does not include cached requests)',
    (s) => s.executionCount,
  ],
  [
    'nv_inference_request_duration_us',
    'Cumulative inference request duration in microseconds, successful requests (includes cached requests)',
    (s) => us(s.success.ns),
  ],
  [
    'nv_inference_queue_duration_us',
    'Cumulative inference queuing duration in microseconds (includes cached requests)',
    (s) => us(s.stages.queueNs),
  ],
  [
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds: batch formed and handed to the worker (does not ' +
      'include cached requests)',
    (s) => us(s.stages.inputNs),
  ],
  [
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds: the model run in its worker (does not include ' +
      'cached requests)',
    (s) => us(s.stages.inferNs),
  ],
  [
    'nv_inference_compute_output_duration_us',
    'Cumulative inference compute output duration in microseconds: outputs back and split per request (does ' +
      'not include cached requests)',
    (s) => us(s.stages.outputNs),
  ],
]

/**
 * Registers Triton's inference metrics on `registry`, labelled `model` and `version`, for the
 * models `models()` lists at each scrape (the service's onnx runners, models loaded at start-up
 * or through the repository extension, ensembles). A model unloaded leaves the scrape, as in Triton.
 */
export function registerTritonMetrics(registry: Registry, models: () => readonly InferenceModel[]): void {
  // One entry per model version, even if a list ever named one twice (a duplicate sample fails a scrape).
  const each = <T>(fn: (m: InferenceModel, labels: Record<string, string>) => T[]): T[] => {
    const seen = new Set<string>()
    return models().flatMap((m) => {
      const key = `${m.name}\n${m.version}`
      if (seen.has(key)) return []
      seen.add(key)
      return fn(m, { model: m.name, version: m.version })
    })
  }
  const [success, ...rest] = COUNTERS
  const counter = ([name, help, read]: (typeof COUNTERS)[number]) =>
    new ScrapedFamily(name, help, 'counter', () => each((m, labels) => [{ labels, value: read(m.stats) }]), registry)
  counter(success!)
  new ScrapedFamily(
    'nv_inference_request_failure',
    'Number of failed inference requests, all batch sizes (reason: REJECTED shed by the scheduler, CANCELED ' +
      'client gone, BACKEND the model run failed, OTHER e.g. inputs the model does not take)',
    'counter',
    () =>
      each((m, labels) =>
        FAILURE_REASONS.map((reason) => ({ labels: { ...labels, reason }, value: m.stats.failures[reason] })),
      ),
    registry,
  )
  for (const c of rest) counter(c)
  new ScrapedFamily(
    'nv_inference_pending_request_count',
    'Instantaneous number of pending requests awaiting execution per-model',
    'gauge',
    () => each((m, labels) => [{ labels, value: m.pending?.() ?? 0 }]),
    registry,
  )
}
