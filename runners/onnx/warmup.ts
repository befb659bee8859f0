import { BundleError } from '../../errors/index.js'
import type { TensorSignature } from '../../store/index.js'
import { TYPED_ARRAYS, type RunnerDType } from '../tensor.js'
import type { OnnxRunnerOptions } from './options.js'

/** [input, output] batch dimensions. */
export function batchDims(options: OnnxRunnerOptions): [number, number] {
  const d = options.batching?.batchDim ?? 0
  return Array.isArray(d) ? d : [d, d]
}

/**
 * Per-row shapes to warm up with, or undefined for no warm-up: explicit `warmup.shapes`, else
 * the model's own shapes when every non-batch dimension is fixed. Asking for a warm-up of a
 * model with variable dimensions and no shapes is a configuration error that names the fix.
 */
export function warmupShapes(
  runner: string,
  options: OnnxRunnerOptions,
  inputs: readonly TensorSignature[],
): { name: string; dtype: RunnerDType; shape: number[] }[] | undefined {
  const w = options.warmup
  if (w === false || (w?.rounds ?? 1) < 1 || inputs.length === 0) return undefined
  const [inDim] = batchDims(options)
  const out: { name: string; dtype: RunnerDType; shape: number[] }[] = []
  for (const input of inputs) {
    const given = w?.shapes?.[input.name]
    const shape = given ?? input.shape.filter((_, i) => i !== inDim)
    const dtype = input.dtype as RunnerDType
    if (!(dtype in TYPED_ARRAYS) || shape.some((d) => !(Number.isInteger(d) && d > 0))) {
      if (w === undefined) return undefined // the default: warm up only where the model says how
      const why = !(dtype in TYPED_ARRAYS)
        ? `its dtype ${input.dtype} cannot be filled with zeros`
        : `its per-row shape is [${shape.join(', ')}]`
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `runner ${runner}: cannot warm up input "${input.name}": ${why}; give warmup.shapes.${input.name} as a ` +
          `list of positive sizes without the batch dimension, or set warmup: false`,
      )
    }
    out.push({ name: input.name, dtype, shape })
  }
  return out
}
