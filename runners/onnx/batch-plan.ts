import { BundleError } from '../../errors/index.js'
import { RUNNER_DEFAULTS } from '../defaults.js'
import type { TensorSpec } from '../inference.js'
import type { OnnxRunnerOptions } from './options.js'

/**
 * How a runner's requests reach the model, decided from the model's own signature as Triton's
 * auto-complete does: requests merge into batches only where the model says they can.
 */
export interface BatchPlan {
  /**
   * true: requests are merged along `dims` and split back (Triton's max_batch_size > 0). false:
   * each request's tensors go to the model exactly as given — never merged, split, padded or
   * reshaped (max_batch_size 0).
   */
  batched: boolean
  /** [input dimension, output dimension] rows run along (batched plans only). */
  dims: [number, number]
  /** Most rows a batch holds; 0 for a model that runs requests as given. */
  maxBatchSize: number
  /** What decided it, for /runners, /v2 config and `bundle models get`. */
  reason: string
}

interface Signature {
  inputs: readonly TensorSpec[]
  outputs: readonly TensorSpec[]
}

const shapeText = (t: TensorSpec) => `[${t.shape.join(',')}]`

/** The first tensor (inputs, then outputs) that cannot carry rows along `dim`, and why; undefined: all can. */
export function blocksBatching(sig: Signature, [inDim, outDim]: readonly [number, number]): string | undefined {
  if (sig.inputs.length === 0) return 'the model takes no inputs'
  const check = (t: TensorSpec, kind: string, dim: number): string | undefined => {
    if (t.dtype === 'non-tensor') return `${kind} "${t.name}" is not a tensor`
    if (t.shape.length === 0) return `${kind} "${t.name}" is a scalar (shape [])`
    if (t.shape.length <= dim) return `${kind} "${t.name}" has shape ${shapeText(t)}, which has no dimension ${dim}`
    const d = t.shape[dim]!
    if (d >= 0) return `${kind} "${t.name}" has shape ${shapeText(t)}, whose dimension ${dim} is fixed at ${d}`
    return undefined
  }
  for (const t of sig.inputs) {
    const why = check(t, 'input', inDim)
    if (why) return why
  }
  for (const t of sig.outputs) {
    const why = check(t, 'output', outDim)
    if (why) return why
  }
  return undefined
}

const explicitDims = (options: OnnxRunnerOptions): [number, number] | undefined => {
  const d = options.batching?.batchDim
  return d === undefined ? undefined : Array.isArray(d) ? d : [d, d]
}

/**
 * The batch plan of `runner` serving a model with signature `sig`. Without settings: batched
 * along dimension 0 when every input's and output's first dimension is variable, else each
 * request runs as given. `batching.maxBatchSize: 0` asks for the latter on any model;
 * `batchDim` or a positive `maxBatchSize` that the model contradicts is refused, naming the
 * tensor that does.
 */
export function decideBatching(runner: string, sig: Signature, options: OnnxRunnerOptions): BatchPlan {
  const asked = options.batching?.maxBatchSize
  const dims = explicitDims(options)
  if (asked === 0) {
    if (dims !== undefined)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `runner ${runner}: batching.maxBatchSize 0 runs each request as given, so batching.batchDim has nothing to ` +
          'do; drop one of the two',
      )
    return { batched: false, dims: [0, 0], maxBatchSize: 0, reason: 'batching.maxBatchSize is 0' }
  }
  const maxBatchSize = asked ?? RUNNER_DEFAULTS.maxBatchSize
  if (dims !== undefined) {
    const why = blocksBatching(sig, dims)
    if (why)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `runner ${runner}: batching.batchDim ${JSON.stringify(options.batching?.batchDim)} contradicts the model: ` +
          `${why}. Requests can merge only along a variable dimension of every input and output; drop batchDim ` +
          'to serve the model as it is (each request run as given)',
      )
    return {
      batched: true,
      dims,
      maxBatchSize,
      reason: `batching.batchDim ${JSON.stringify(options.batching?.batchDim)}`,
    }
  }
  const why = blocksBatching(sig, [0, 0])
  if (why === undefined)
    return {
      batched: true,
      dims: [0, 0],
      maxBatchSize,
      reason: 'the first dimension of every input and output is variable',
    }
  if (asked !== undefined)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `runner ${runner}: batching.maxBatchSize ${asked} asks to merge requests into batches, but the model cannot ` +
        `batch: ${why}. Drop maxBatchSize (each request then runs as given, max_batch_size 0), or export the ` +
        'model with a variable first dimension',
    )
  return { batched: false, dims: [0, 0], maxBatchSize: 0, reason: why }
}
