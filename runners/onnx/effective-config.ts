import type { ModelInfo } from '../../store/index.js'
import { resolveBatching, RUNNER_DEFAULTS } from '../defaults.js'
import type { SequenceSpec } from '../sequence/protocol.js'
import { sequenceView } from '../sequence/setup.js'
import type { BatchPlan } from './batch-plan.js'
import type { OnnxRunnerOptions } from './options.js'

/**
 * An onnx runner's settings as GET /runners shows them. Once started, what the serving
 * generation really runs with (its model, the workers it started, its batching and warm-up);
 * before, what start() would use. Every default is filled in; nothing is tensor data.
 */
export function effectiveConfig(r: {
  kind: string
  tag: string
  model: ModelInfo | undefined
  options: OnnxRunnerOptions
  running:
    | {
        options: OnnxRunnerOptions
        workers: number
        threads?: number | undefined
        warmup: unknown
        sequence?: SequenceSpec | undefined
        plan: BatchPlan
      }
    | undefined
  remote: boolean
  /** Why the default warm-up failed, when it did (the model serves anyway). */
  warmupFailure?: string | undefined
}): Record<string, unknown> {
  const plan = r.running?.plan
  const { home: _home, ...options } = r.running?.options ?? r.options
  const { maxLatencyMs: _old, ...batchingOptions } = options.batching ?? {}
  const b = resolveBatching(options)
  return {
    kind: r.kind,
    tag: r.tag,
    ...(r.model ? { model: r.model.tag, digest: r.model.digest } : {}),
    ...options,
    timeoutMs: b.timeoutMs,
    deadlineMs: b.deadlineMs,
    batchesPerWorker: b.batchesPerWorker,
    workers: r.running?.workers ?? options.minWorkers ?? options.workers ?? RUNNER_DEFAULTS.workers,
    // The threads the workers run with ('auto': onnxruntime's own default, as on a GPU).
    intraOpThreads: r.running?.threads ?? options.intraOpThreads ?? 'auto',
    isolation: r.remote ? 'remote' : (options.isolation ?? RUNNER_DEFAULTS.isolation),
    // Once started, what the model allowed: a model that runs requests as given has max batch size 0.
    batching: {
      ...batchingOptions,
      enabled: plan ? plan.batched && b.enabled : b.enabled,
      maxBatchSize: plan ? plan.maxBatchSize : b.maxBatchSize,
      maxDelayMs: b.maxDelayMs,
      maxQueueSize: b.maxQueueSize,
      ...(plan ? { ...(plan.batched ? { batchDim: plan.dims } : {}), decided: plan.reason } : {}),
    },
    warmup: r.running?.warmup ?? options.warmup ?? 'auto',
    ...(r.warmupFailure ? { warmupFailed: r.warmupFailure } : {}),
    // Constants are tensors: shown by dtype and shape (their data may be BigInts JSON cannot hold).
    ...(options.sequence ? { sequence: sequenceView(options.sequence, r.running?.sequence) } : {}),
  }
}
