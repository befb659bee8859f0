import { readFileSync } from 'node:fs'
import { BundleError } from '../../errors/index.js'
import { batchSizes } from '../batching/latency-model.js'
import type { TensorSpec } from '../inference.js'
import type { WireTensor } from '../pool/protocol.js'
import { encodeStrings, TYPED_ARRAYS, zeros, type RunnerDType } from '../tensor.js'
import type { BatchPlan } from './batch-plan.js'
import type { OnnxRunnerOptions, WarmupSample } from './options.js'

/** [input, output] batch dimensions as the options give them (a sequence runner's state axes). */
export function batchDims(options: OnnxRunnerOptions): [number, number] {
  const d = options.batching?.batchDim ?? 0
  return Array.isArray(d) ? d : [d, d]
}

/** One warm-up call: its inputs, the rows it carries, how often it runs untimed and timed. */
export interface WarmupCall {
  rows: number
  inputs: () => Record<string, WireTensor>
  untimed: number
  timed: number
}

/**
 * What a generation warms up with. `required`: the operator asked for it, so a failure fails the
 * load; otherwise it is a default the model may not suit (zeros are not valid input for every
 * model), and a failure is reported while the model loads anyway. `view` is what /runners shows.
 */
export interface WarmupPlan {
  calls: WarmupCall[]
  required: boolean
  view: unknown
}

const bad = (runner: string, msg: string) => new BundleError('E_SERVE_CONFIG_INVALID', `runner ${runner}: ${msg}`)
const isSize = (d: number) => Number.isInteger(d) && d >= 0
const fillable = (dtype: string) => dtype in TYPED_ARRAYS || dtype === 'string'

/** A tensor of zeros (empty strings for string inputs). */
function zeroTensor(dtype: string, shape: number[]): WireTensor {
  if (dtype === 'string') return { dtype, shape, data: encodeStrings(new Array(count(shape)).fill('')) }
  return zeros(dtype as RunnerDType, shape)
}

const count = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1)

/** Random values: floats in [0, 1), integers in [0, 10), booleans, short strings (Triton's random_data). */
function randomTensor(dtype: string, shape: number[]): WireTensor {
  const n = count(shape)
  if (dtype === 'string')
    return { dtype, shape, data: encodeStrings(Array.from({ length: n }, () => Math.random().toString(36).slice(2))) }
  const Ctor = TYPED_ARRAYS[dtype as RunnerDType]
  const arr = new Ctor(n)
  for (let i = 0; i < n; i++) {
    const r = Math.random()
    if (arr instanceof BigInt64Array || arr instanceof BigUint64Array) arr[i] = BigInt(Math.floor(r * 10))
    else if (dtype === 'float32' || dtype === 'float64') arr[i] = r
    else if (dtype === 'float16')
      arr[i] = 0x3c00 - Math.floor(r * 1024) // halves in (0, 1]
    else if (dtype === 'bool') arr[i] = r < 0.5 ? 0 : 1
    else arr[i] = Math.floor(r * 10)
  }
  return { dtype, shape, data: new Uint8Array(arr.buffer, 0, arr.byteLength) }
}

/** Triton-style samples: each input zero, random or read from a file of raw little-endian bytes. */
function sampleCalls(
  runner: string,
  samples: readonly WarmupSample[],
  inputs: readonly TensorSpec[],
  plan: BatchPlan,
): WarmupCall[] {
  return samples.map((s, i) => {
    const where = `warmup.samples[${i}]${s.name ? ` (${s.name})` : ''}`
    const rows = plan.batched ? (s.batchSize ?? 1) : 1
    const tensors = Object.entries(s.inputs).map(([name, given]) => {
      const declared = inputs.find((x) => x.name === name)
      if (declared === undefined)
        throw bad(runner, `${where} feeds "${name}", which the model does not take (${names(inputs)})`)
      const dtype = given.dtype ?? declared.dtype
      if (!fillable(dtype)) throw bad(runner, `${where}: input "${name}" has dtype ${dtype}, which cannot be filled`)
      // A batched model's dims leave out the batch dimension, as Triton's do.
      const shape = plan.batched
        ? [...given.dims.slice(0, plan.dims[0]), rows, ...given.dims.slice(plan.dims[0])]
        : [...given.dims]
      if (given.inputDataFile !== undefined) {
        let bytes: Uint8Array
        try {
          bytes = readFileSync(given.inputDataFile)
        } catch {
          throw bad(runner, `${where}: input "${name}": cannot read ${given.inputDataFile}`)
        }
        const tensor = { dtype, shape, data: bytes }
        const size =
          dtype === 'string' ? undefined : count(shape) * TYPED_ARRAYS[dtype as RunnerDType].BYTES_PER_ELEMENT
        if (size !== undefined && bytes.byteLength !== size)
          throw bad(
            runner,
            `${where}: ${given.inputDataFile} holds ${bytes.byteLength} bytes; input "${name}" of shape ` +
              `[${shape.join(',')}] (${dtype}) needs ${size}`,
          )
        return [name, () => tensor] as const
      }
      return [name, () => (given.randomData ? randomTensor(dtype, shape) : zeroTensor(dtype, shape))] as const
    })
    return {
      rows,
      inputs: () => Object.fromEntries(tensors.map(([n, make]) => [n, make()])),
      untimed: 0,
      timed: s.count ?? 1,
    }
  })
}

const names = (inputs: readonly TensorSpec[]) => inputs.map((x) => `"${x.name}"`).join(', ') || 'no inputs'

/**
 * The warm-up of a generation, from the options and the model's inputs (`inputs`: those callers
 * send). Explicit samples run as given. Otherwise every input needs a known shape: from
 * `warmup.shapes` (per row for a batched model, whole for one that runs requests as given) or
 * from the model itself; a batched model warms every batch size it may run (the timings seed
 * the batcher). Explicit settings that cannot be met are a configuration error naming the fix;
 * the default warms up only where the model fully defines its inputs.
 */
export function warmupPlan(
  runner: string,
  options: OnnxRunnerOptions,
  inputs: readonly TensorSpec[],
  plan: BatchPlan,
  batching: { enabled: boolean; maxBatchSize: number },
): WarmupPlan {
  const w = options.warmup
  const off = (view: unknown): WarmupPlan => ({ calls: [], required: false, view })
  if (w === false || (w?.rounds ?? 1) < 1) return off(false)
  const required = w !== undefined
  if (w?.samples?.length)
    return {
      calls: sampleCalls(runner, w.samples, inputs, plan),
      required,
      view: { samples: w.samples.map((s, i) => s.name ?? `sample ${i}`) },
    }
  const rounds = w?.rounds ?? 1
  const [inDim] = plan.dims
  const shapes: { name: string; dtype: string; shape: number[] }[] = []
  for (const input of inputs) {
    const given = w?.shapes?.[input.name]
    const shape = given ?? (plan.batched ? input.shape.filter((_, i) => i !== inDim) : input.shape)
    const fixed = shape.every(isSize) && (!plan.batched || shape.every((d) => d > 0))
    if (!fillable(input.dtype) || !fixed) {
      if (!required) return off(`off: ${offReason(input, shape, plan)}; set warmup.shapes`)
      const why = !fillable(input.dtype)
        ? `its dtype ${input.dtype} cannot be filled with zeros`
        : `its ${plan.batched ? 'per-row ' : ''}shape is [${shape.join(', ')}]`
      throw bad(
        runner,
        `cannot warm up input "${input.name}": ${why}; give warmup.shapes.${input.name} as a list of ` +
          `${plan.batched ? 'positive sizes without the batch dimension' : 'the sizes of the whole input'}, or set ` +
          'warmup: false',
      )
    }
    shapes.push({ name: input.name, dtype: input.dtype, shape })
  }
  const sizes = plan.batched && batching.enabled ? batchSizes(batching.maxBatchSize) : [1]
  const calls = sizes.map((rows) => ({
    rows,
    inputs: () =>
      Object.fromEntries(
        shapes.map(({ name, dtype, shape }) => [
          name,
          zeroTensor(dtype, plan.batched ? [...shape.slice(0, inDim), rows, ...shape.slice(inDim)] : shape),
        ]),
      ),
    // onnxruntime's first run at a new shape plans its memory and its second is the slowest of all
    // (2-3x the steady time for the quickstart's model, at every batch size): timing that one seeded
    // the batcher with times that kept a tight deadline from ever trying the sizes that fit.
    untimed: 2,
    timed: rounds,
  }))
  const view = Object.fromEntries(shapes.map((s) => [s.name, s.shape]))
  return { calls, required, view: plan.batched ? { rounds, sizes, shapes: view } : { rounds, shapes: view } }
}

function offReason(input: TensorSpec, shape: number[], plan: BatchPlan): string {
  if (!fillable(input.dtype)) return `input "${input.name}" has dtype ${input.dtype}`
  return plan.batched
    ? 'the model has variable non-batch dimensions'
    : `input "${input.name}" has shape [${shape.join(',')}], not fixed by the model`
}
