import { mergeOverrides, type RunnerOverrides } from '../config.js'
import { resolveBatching, RUNNER_DEFAULTS } from '../defaults.js'

export interface CustomMethodOptions {
  /** The worker method takes an array of items and returns one result per item, in order. */
  batchable?: boolean
  maxBatchSize?: number
  /** The batch window (default 10 ms): see onnxRunner's batching.maxDelayMs. */
  maxDelayMs?: number
  /** Queue plus run per call (default the runner's deadlineMs, else 10 000 ms). */
  deadlineMs?: number
  /** Calls that may wait at once (default 64 × maxBatchSize); past it a call is refused at once. */
  maxQueueSize?: number
  /** @deprecated the deadline's old name: use deadlineMs. */
  maxLatencyMs?: number
}

export interface CustomRunnerOptions {
  name: string
  workers?: number
  /** Child processes (default) or threads of the API process: see onnxRunner's `isolation`. */
  isolation?: 'process' | 'thread'
  timeoutMs?: number
  /** Queue plus run for batched calls (default 10 000 ms); a method's own deadlineMs wins. */
  deadlineMs?: number
  /** Calls handed to each worker at once (default 2); the worker runs them one after the other. */
  batchesPerWorker?: number
  /** Methods to batch; every other method is called as is. */
  methods?: Record<string, CustomMethodOptions>
}

/** A batchable method's batcher settings, every default filled in. */
export interface MethodBatching {
  batchable: true
  maxBatchSize: number
  maxDelayMs: number
  deadlineMs: number
  maxQueueSize: number
}

/** What a custom runner runs with: its code's options under the operator's overrides, defaults filled in. */
export interface CustomSettings {
  workers: number
  isolation: 'process' | 'thread'
  timeoutMs: number
  batchesPerWorker: number
  /** The runner's own deadline, when code or operator set one (methods fall back to it). */
  deadlineMs?: number
  methods: Record<string, MethodBatching | { batchable: false }>
}

/**
 * Resolves a custom runner's settings. The operator's overrides merge over the code's options
 * as an onnx runner's do (mergeOverrides), and an operator's batching settings and deadline
 * apply to every batchable method, over what the code says for it; `batching.enabled: false`
 * turns batching off for all of them.
 */
export function customSettings(code: CustomRunnerOptions, operator: RunnerOverrides): CustomSettings {
  const { name: _name, methods, ...own } = code
  const r = mergeOverrides<RunnerOverrides>(own, operator)
  // The deadline's old name, batching.maxLatencyMs, still sets it when deadlineMs is not given.
  const operatorDeadline = operator.deadlineMs ?? operator.batching?.maxLatencyMs
  const deadlineMs = operatorDeadline ?? code.deadlineMs
  const b = resolveBatching(r)
  const ob = operator.batching ?? {}
  return {
    workers: r.workers ?? RUNNER_DEFAULTS.workers,
    isolation: r.isolation ?? RUNNER_DEFAULTS.isolation,
    timeoutMs: b.timeoutMs,
    batchesPerWorker: b.batchesPerWorker,
    ...(deadlineMs !== undefined ? { deadlineMs } : {}),
    methods: Object.fromEntries(
      Object.entries(methods ?? {}).map(([method, m]) => {
        if (!m.batchable || ob.enabled === false) return [method, { batchable: false as const }]
        const mb = resolveBatching({
          deadlineMs: operatorDeadline ?? m.deadlineMs ?? m.maxLatencyMs ?? code.deadlineMs,
          batching: {
            maxBatchSize: ob.maxBatchSize ?? m.maxBatchSize,
            maxDelayMs: ob.maxDelayMs ?? m.maxDelayMs,
            maxQueueSize: ob.maxQueueSize ?? m.maxQueueSize,
          },
        })
        return [
          method,
          {
            batchable: true as const,
            maxBatchSize: mb.maxBatchSize,
            maxDelayMs: mb.maxDelayMs,
            deadlineMs: mb.deadlineMs,
            maxQueueSize: mb.maxQueueSize,
          },
        ]
      }),
    ),
  }
}
