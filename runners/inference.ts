import type { RunOptions } from './sequence/options.js'
import type { RunnerStats } from './stats.js'
import type { RunnerTensor } from './tensor.js'

/** An input or output as a model declares it: runner dtype (`float32`…), -1 for a variable dimension. */
export interface TensorSpec {
  name: string
  dtype: string
  shape: number[]
}

/**
 * A model as the Open Inference Protocol sees it: what the /v2 routes need of a runner.
 * Inference goes through the runner's own batcher, like the service's APIs.
 */
export interface InferenceModel {
  readonly name: string
  readonly version: string
  readonly platform: string
  ready(): boolean
  inputs(): TensorSpec[]
  outputs(): TensorSpec[]
  /**
   * Most rows one request may carry along the first dimension (Triton's max_batch_size); 0 for
   * a model that runs each request exactly as given (its inputs' shapes are checked whole).
   */
  maxBatchSize(): number
  /** Triton-style model configuration (the model configuration extension). */
  config(): Record<string, unknown>
  readonly stats: RunnerStats
  /** Requests waiting in the model's batching queue now (absent: it has no queue of its own, as an ensemble). */
  pending?(): number
  /** Ensembles: each step's model, the version it last called, and its successes and failures. */
  stepStats?(): {
    model_name: string
    model_version: string
    success: { count: number; ns: number }
    fail: { count: number; ns: number }
  }[]
  /**
   * A stateful model (Triton's sequence batcher): every request names its sequence (the
   * protocol's sequence_id, sequence_start, sequence_end); absent for any other model.
   */
  readonly sequence?: { idleTimeoutMs: number }
  /**
   * A request for this model arrived while the server had nothing else in flight: its idle
   * workers stay awake for the call (runners/pool/hot-wait.ts). Absent where there is nothing to wake.
   */
  expectCall?(): void
  /** `options.sequence`: required by a stateful model, refused by the others. */
  infer(inputs: Record<string, RunnerTensor>, options?: RunOptions): Promise<Record<string, RunnerTensor>>
}
