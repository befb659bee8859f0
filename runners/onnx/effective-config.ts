import type { ModelInfo } from '../../store/index.js'
import { resolveBatching, RUNNER_DEFAULTS } from '../defaults.js'
import type { SequenceSpec } from '../pool/protocol.js'
import { sequenceView } from '../sequence/setup.js'
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
    | { options: OnnxRunnerOptions; workers: number; warmup: unknown; sequence?: SequenceSpec | undefined }
    | undefined
  remote: boolean
}): Record<string, unknown> {
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
    isolation: r.remote ? 'remote' : (options.isolation ?? RUNNER_DEFAULTS.isolation),
    batching: {
      ...batchingOptions,
      enabled: b.enabled,
      maxBatchSize: b.maxBatchSize,
      maxDelayMs: b.maxDelayMs,
      maxQueueSize: b.maxQueueSize,
    },
    warmup: r.running?.warmup ?? options.warmup ?? 'auto',
    // Constants are tensors: shown by dtype and shape (their data may be BigInts JSON cannot hold).
    ...(options.sequence ? { sequence: sequenceView(options.sequence, r.running?.sequence) } : {}),
  }
}
