import type { WireTensor } from './pool/protocol.js'

/** The one table of tensor dtypes and their typed arrays (the HTTP tensor IO uses it too). */
export const TYPED_ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  // IEEE half precision, carried as its raw 16-bit patterns (onnxruntime takes them as such).
  float16: Uint16Array,
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
type AnyTypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array

/** A dense row-major tensor as runners take and return it. */
export interface NumericTensor {
  dtype: RunnerDType
  shape: number[]
  data: AnyTypedArray
}

/** A tensor of strings (ONNX `string`, the protocol's BYTES). */
export interface StringTensor {
  dtype: 'string'
  shape: number[]
  data: string[]
}

export type RunnerTensor = NumericTensor | StringTensor

const bytesOf = (t: { data: ArrayBufferView }): Uint8Array =>
  new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)

/**
 * Strings on the wire as the Open Inference Protocol has BYTES: each a 4-byte little-endian length, then its UTF-8
 * bytes.
 */
export function encodeStrings(values: readonly string[]): Uint8Array {
  const parts = values.map((v) => Buffer.from(v, 'utf8'))
  const out = Buffer.alloc(parts.reduce((n, p) => n + 4 + p.byteLength, 0))
  let at = 0
  for (const p of parts) {
    out.writeUInt32LE(p.byteLength, at)
    p.copy(out, at + 4)
    at += 4 + p.byteLength
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
}

/** The strings of `encodeStrings` bytes; undefined when the bytes are not exactly such a sequence. */
export function decodeStrings(bytes: Uint8Array): string[] | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out: string[] = []
  let at = 0
  while (at < b.byteLength) {
    if (at + 4 > b.byteLength) return undefined
    const n = b.readUInt32LE(at)
    if (at + 4 + n > b.byteLength) return undefined
    out.push(b.toString('utf8', at + 4, at + 4 + n))
    at += 4 + n
  }
  return out
}

export function toWire(t: RunnerTensor): WireTensor {
  if (t.dtype === 'string') return { dtype: 'string', shape: t.shape, data: encodeStrings(t.data) }
  return { dtype: t.dtype, shape: t.shape, data: bytesOf(t) }
}

/** The typed-array view of wire bytes; copies only when the bytes sit at an offset the type cannot view. */
export function fromWire(w: WireTensor): RunnerTensor {
  if (w.dtype === 'string') {
    const data = decodeStrings(w.data)
    if (data === undefined) throw new Error('malformed string tensor bytes')
    return { dtype: 'string', shape: w.shape, data }
  }
  const Ctor = TYPED_ARRAYS[w.dtype as RunnerDType]
  if (Ctor === undefined) throw new Error(`unsupported dtype ${w.dtype}`)
  const size = Ctor.BYTES_PER_ELEMENT
  if (w.data.byteOffset % size === 0 && w.data.byteLength % size === 0) {
    return {
      dtype: w.dtype as RunnerDType,
      shape: w.shape,
      data: new Ctor(w.data.buffer as ArrayBuffer, w.data.byteOffset, w.data.byteLength / size) as AnyTypedArray,
    }
  }
  const copy = new Uint8Array(w.data.byteLength) // aligned
  copy.set(w.data)
  return { dtype: w.dtype as RunnerDType, shape: w.shape, data: new Ctor(copy.buffer) as AnyTypedArray }
}

/** Bytes of one row along dimension 0. */
const rowBytes = (t: WireTensor): number => (t.shape[0]! === 0 ? 0 : t.data.byteLength / t.shape[0]!)

/**
 * Outer blocks and the bytes of one row inside each, for rows along `dim`: a tensor of shape
 * [a, b, c] batched along dim 1 is `a` blocks, each holding `b` rows of c elements.
 */
function layout(t: WireTensor, dim: number): { outer: number; row: number } {
  const outer = t.shape.slice(0, dim).reduce((a, b) => a * b, 1)
  const rows = t.shape[dim]!
  return { outer, row: outer * rows === 0 ? 0 : t.data.byteLength / (outer * rows) }
}

/** Row slicing and concatenation of string tensors: elements, not bytes (their sizes vary). */
function viaElements(t: WireTensor, fn: (values: string[], rowSize: number) => string[], shape: number[]): WireTensor {
  const values = decodeStrings(t.data) ?? []
  const rowSize = t.shape.slice(1).reduce((a, b) => a * b, 1)
  return { dtype: 'string', shape, data: encodeStrings(fn(values, rowSize)) }
}

/** Rows [start, start + rows) along `dim`: a view for dim 0, a copy otherwise. */
export function sliceRows(t: WireTensor, start: number, rows: number, dim = 0): WireTensor {
  if (t.dtype === 'string') {
    if (dim !== 0) throw new Error('string tensors are batched along dimension 0 only')
    return viaElements(t, (v, size) => v.slice(start * size, (start + rows) * size), [rows, ...t.shape.slice(1)])
  }
  if (dim === 0) {
    const rb = rowBytes(t)
    return {
      dtype: t.dtype,
      shape: [rows, ...t.shape.slice(1)],
      data: t.data.subarray(start * rb, (start + rows) * rb),
    }
  }
  const { outer, row } = layout(t, dim)
  const total = t.shape[dim]!
  const data = new Uint8Array(outer * rows * row)
  for (let o = 0; o < outer; o++)
    data.set(t.data.subarray((o * total + start) * row, (o * total + start + rows) * row), o * rows * row)
  return { dtype: t.dtype, shape: t.shape.map((d, i) => (i === dim ? rows : d)), data }
}

/** Concatenates tensors of one dtype whose other dimensions agree, along `dim`. */
export function concatRows(parts: readonly WireTensor[], dim = 0): WireTensor {
  if (parts.length === 1) return parts[0]!
  if (parts[0]!.dtype === 'string' && dim !== 0) throw new Error('string tensors are batched along dimension 0 only')
  // Along dimension 0 the encoded string sequences simply follow one another.
  const total = parts.reduce((n, p) => n + p.data.byteLength, 0)
  const data = new Uint8Array(total)
  const rows = parts.reduce((n, p) => n + p.shape[dim]!, 0)
  const shape = parts[0]!.shape.map((d, i) => (i === dim ? rows : d))
  if (dim === 0) {
    let off = 0
    for (const p of parts) {
      data.set(p.data, off)
      off += p.data.byteLength
    }
    return { dtype: parts[0]!.dtype, shape, data }
  }
  // Each outer block of the result is the parts' blocks one after another.
  const { outer } = layout(parts[0]!, dim)
  let off = 0
  for (let o = 0; o < outer; o++) {
    for (const p of parts) {
      const block = p.data.byteLength / outer
      data.set(p.data.subarray(o * block, (o + 1) * block), off)
      off += block
    }
  }
  return { dtype: parts[0]!.dtype, shape, data }
}

/** A tensor of zeros on the wire (warm-up batches). */
export function zeros(dtype: RunnerDType, shape: number[]): WireTensor {
  const Ctor = TYPED_ARRAYS[dtype]
  return { dtype, shape, data: new Uint8Array(shape.reduce((a, b) => a * b, 1) * Ctor.BYTES_PER_ELEMENT) }
}
