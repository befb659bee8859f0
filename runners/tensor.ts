import type { WireTensor } from './pool/protocol.js'

/** The one table of tensor dtypes and their typed arrays (the HTTP tensor IO uses it too). */
export const TYPED_ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
} as const

export type RunnerDType = keyof typeof TYPED_ARRAYS
type AnyTypedArray = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array

/** A dense row-major tensor as runners take and return it. */
export interface RunnerTensor {
  dtype: RunnerDType
  shape: number[]
  data: AnyTypedArray
}

const bytesOf = (t: { data: ArrayBufferView }): Uint8Array => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)

export function toWire(t: RunnerTensor): WireTensor {
  return { dtype: t.dtype, shape: t.shape, data: bytesOf(t) }
}

export function fromWire(w: WireTensor): RunnerTensor {
  const Ctor = TYPED_ARRAYS[w.dtype as RunnerDType]
  if (Ctor === undefined) throw new Error(`unsupported dtype ${w.dtype}`)
  const copy = new Uint8Array(w.data.byteLength) // aligned
  copy.set(w.data)
  return { dtype: w.dtype as RunnerDType, shape: w.shape, data: new Ctor(copy.buffer) as AnyTypedArray }
}

/** Bytes of one row along dimension 0. */
const rowBytes = (t: WireTensor): number => (t.shape[0]! === 0 ? 0 : t.data.byteLength / t.shape[0]!)

/** Rows [start, start + rows) of a tensor, as a view (no copy). */
export function sliceRows(t: WireTensor, start: number, rows: number): WireTensor {
  const rb = rowBytes(t)
  return { dtype: t.dtype, shape: [rows, ...t.shape.slice(1)], data: t.data.subarray(start * rb, (start + rows) * rb) }
}

/** Concatenates tensors of one dtype and trailing shape along dimension 0. */
export function concatRows(parts: readonly WireTensor[]): WireTensor {
  if (parts.length === 1) return parts[0]!
  const total = parts.reduce((n, p) => n + p.data.byteLength, 0)
  const data = new Uint8Array(total)
  let off = 0
  for (const p of parts) {
    data.set(p.data, off)
    off += p.data.byteLength
  }
  return { dtype: parts[0]!.dtype, shape: [parts.reduce((n, p) => n + p.shape[0]!, 0), ...parts[0]!.shape.slice(1)], data }
}
