import { BundleError } from '../../errors/index.js'
import { RUNNER_DEFAULTS } from '../defaults.js'
import type { OnnxRunnerOptions } from '../onnx/options.js'
import type { SequenceSpec } from './protocol.js'
import { DEFAULT_SEQUENCE_IDLE_MS, type SequenceOptions } from './options.js'

// How an onnx runner with a `sequence` option differs at start and in what it reports: the
// options it refuses, its settings as GET /runners shows them, its Triton model configuration.

/**
 * The options a sequence runner cannot have: its state lives in its local workers, so no remote
 * workers (a BullMQ job may run anywhere), no autoscaling (a removed worker takes its sequences'
 * state with it) and no response cache (the same frame answers differently as the state moves).
 */
export function refuseConflicts(runner: string, o: OnnxRunnerOptions, remote: boolean): void {
  if (o.sequence === undefined) return
  const refuse = (what: string, fix: string) =>
    new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `runner ${runner} keeps sequence state in its workers, so it cannot ${what}; ${fix}`,
    )
  if (remote)
    throw refuse(
      'run on remote workers (state cannot live in BullMQ workers)',
      'serve it with local runners (drop --runners remote for this service)',
    )
  if (o.cache) throw refuse('use a response cache (answers depend on the state)', 'drop its cache option')
  const min = o.minWorkers ?? o.workers ?? RUNNER_DEFAULTS.workers
  if (o.maxWorkers !== undefined && o.maxWorkers > min)
    throw refuse('autoscale (a removed worker would drop its sequences)', 'set workers instead of maxWorkers')
}

/** The sequence settings as GET /runners shows them: tensors as dtype and shape, never their data. */
export function sequenceView(o: SequenceOptions, spec: SequenceSpec | undefined): Record<string, unknown> {
  return {
    state: spec ? spec.state.map((s) => ({ ...s })) : o.state.map((s) => ({ ...s, batchAxis: s.batchAxis ?? 0 })),
    constants: Object.fromEntries(
      Object.entries(spec?.constants ?? o.constants ?? {}).map(([k, t]) => [k, { dtype: t.dtype, shape: t.shape }]),
    ),
    idleTimeoutMs: o.idleTimeoutMs ?? DEFAULT_SEQUENCE_IDLE_MS,
  }
}

const tritonType = (dtype: string): string =>
  `TYPE_${dtype.startsWith('float') ? `FP${dtype.slice(5)}` : dtype.toUpperCase()}`

/**
 * Triton's `sequence_batching` section: the "oldest" strategy (the frames of different sequences
 * are batched, at most one per sequence, each sequence on its own model instance) with implicit
 * state. A state's `dims` leave out its batch axis, as Triton's do; `batch_axis` (ours) says where it goes.
 */
export function sequenceBatching(
  spec: SequenceSpec,
  o: { idleTimeoutMs: number; maxDelayMs: number; maxBatchSize: number },
): Record<string, unknown> {
  return {
    max_sequence_idle_microseconds: Math.round(o.idleTimeoutMs * 1000),
    control_input: [],
    oldest: {
      max_candidate_sequences: o.maxBatchSize,
      max_queue_delay_microseconds: Math.round(o.maxDelayMs * 1000),
      preserve_ordering: true,
    },
    state: spec.state.map((s) => ({
      input_name: s.input,
      output_name: s.output,
      data_type: tritonType(s.dtype),
      dims: s.shape.filter((_, k) => k !== s.batchAxis),
      batch_axis: s.batchAxis,
    })),
  }
}
