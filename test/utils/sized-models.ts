import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { encodeModel, initializer, node } from './onnx-graph.js'

// Models of a chosen size for the memory-budget tests and bench:models: y = ReduceSum(x · W) + k,
// with x [n, 8], W [8, K] filled so that its sum is 1, and k the model's own number. For x of all
// ones each model answers 1 + k: a wrong model's answer shows.

const ROWS = 8

/** A model of about `bytes` bytes (its weights) that answers 1 + `k` for an input of ones. */
export function sizedModel(k: number, bytes: number): Uint8Array {
  const cols = Math.max(1, Math.round(bytes / 4 / ROWS))
  const w = new Float32Array(ROWS * cols).fill(1 / (ROWS * cols))
  return encodeModel({
    nodes: [
      node('MatMul', ['x', 'w'], ['xw']),
      node('ReduceSum', ['xw', 'axes'], ['s'], { keepdims: 1 }),
      node('Add', ['s', 'k'], ['y']),
    ],
    inputs: [{ name: 'x', dtype: 'float32', dims: ['n', ROWS] }],
    outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 1] }],
    initializers: [
      initializer('w', 'float32', [ROWS, cols], w),
      initializer('axes', 'int64', [1], new BigInt64Array([1n])),
      initializer('k', 'float32', [1], new Float32Array([k])),
    ],
  })
}

/** The input a sized model takes: `n` rows of ones. */
export const sizedInput = (n = 1): { dtype: 'float32'; shape: number[]; data: Float32Array } => ({
  dtype: 'float32',
  shape: [n, ROWS],
  data: new Float32Array(n * ROWS).fill(1),
})

/** Writes `count` models, sizes spread evenly from `minBytes` to `maxBytes`; answers their paths and sizes. */
export function writeSizedModels(
  dir: string,
  count: number,
  minBytes: number,
  maxBytes: number,
): { name: string; path: string; bytes: number; answer: number }[] {
  return Array.from({ length: count }, (_, k) => {
    const bytes = count === 1 ? minBytes : minBytes + ((maxBytes - minBytes) * k) / (count - 1)
    const path = join(dir, `m${k}.onnx`)
    writeFileSync(path, sizedModel(k, bytes))
    return { name: `m${k}`, path, bytes, answer: 1 + k }
  })
}
