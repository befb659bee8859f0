import type { ModelInfo } from '../../store/index.js'
import type { InferenceModel, TensorSpec } from '../inference.js'
import type { RunnerStats } from '../stats.js'
import type { RunnerTensor } from '../tensor.js'
import type { BatchPlan } from './batch-plan.js'
import type { OnnxRunnerOptions } from './options.js'
import { MAX_PRIORITY, PRIORITY } from '../batching/priority.js'
import { resolveBatching } from '../defaults.js'
import type { SequenceSpec } from '../sequence/protocol.js'
import { DEFAULT_SEQUENCE_IDLE_MS, frameSignature, type RunOptions } from '../sequence/options.js'
import { sequenceBatching } from '../sequence/setup.js'

/** A model file's inputs and outputs as the runner reports them. */
export function signatureOf(model: ModelInfo, onnxPath: string): { inputs: TensorSpec[]; outputs: TensorSpec[] } {
  const sig = model.signatures[onnxPath]
  const spec = (t: { name: string; dtype: string; shape: number[] }): TensorSpec => ({
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
  })
  return { inputs: (sig?.inputs ?? []).map(spec), outputs: (sig?.outputs ?? []).map(spec) }
}

/** The signature an onnx runner serves for a stored model: that of its (first) .onnx file. */
export function modelSignature(model: ModelInfo): { inputs: TensorSpec[]; outputs: TensorSpec[] } | undefined {
  const onnx = model.files.find((f) => f.path.endsWith('.onnx'))
  return onnx === undefined ? undefined : signatureOf(model, onnx.path)
}

/** An onnx runner's loaded model as the Open Inference Protocol (/v2) describes and calls it. */
export function inferenceModel(r: {
  name: string
  model: ModelInfo
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] }
  /** Merged into batches, or each request as given (max_batch_size 0). */
  plan: BatchPlan
  options: OnnxRunnerOptions
  /** Worker processes now (Triton's instance count). */
  instances: () => number
  ready: () => boolean
  run: (inputs: Record<string, RunnerTensor>, options?: RunOptions) => Promise<Record<string, RunnerTensor>>
  stats: RunnerStats
  /** Requests queued in the model's batcher now. */
  pending: () => number
  /** A lone request is coming: wake the idle worker it will go to. */
  expectCall: () => void
  /** A stateful model's state and constants: callers neither send nor get them. */
  sequence?: SequenceSpec | undefined
}): InferenceModel {
  const b = resolveBatching(r.options)
  const kind = r.options.resources?.gpu ? 'KIND_GPU' : 'KIND_CPU'
  const seq = r.sequence
  const io = seq ? frameSignature(r.signature, seq) : r.signature
  const idleTimeoutMs = r.options.sequence?.idleTimeoutMs ?? DEFAULT_SEQUENCE_IDLE_MS
  return {
    name: r.name,
    version: r.model.version,
    platform: 'onnxruntime_onnx',
    ready: r.ready,
    inputs: () => io.inputs,
    outputs: () => io.outputs,
    maxBatchSize: () => r.plan.maxBatchSize,
    config: () => ({
      name: r.name,
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      max_batch_size: r.plan.maxBatchSize,
      // Triton's names: the batch window, and the queue policy (its timeout is our deadline).
      // Triton has one scheduler per model: a stateful model's is the sequence batcher.
      ...(seq ? { sequence_batching: sequenceBatching(seq, { ...b, idleTimeoutMs }) } : {}),
      dynamic_batching:
        b.enabled && r.plan.batched && !seq
          ? {
              max_queue_delay_microseconds: Math.round(b.maxDelayMs * 1000),
              preserve_ordering: true,
              default_queue_policy: {
                timeout_action: 'REJECT',
                default_timeout_microseconds: Math.round(b.deadlineMs * 1000),
                max_queue_size: b.maxQueueSize,
              },
              priority_levels: MAX_PRIORITY,
              default_priority_level: PRIORITY.normal,
            }
          : undefined,
      instance_group: [{ count: r.instances(), kind }],
      model: r.model.tag,
      digest: r.model.digest,
    }),
    stats: r.stats,
    pending: r.pending,
    expectCall: r.expectCall,
    ...(seq ? { sequence: { idleTimeoutMs } } : {}),
    infer: r.run,
  }
}
