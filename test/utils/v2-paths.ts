import * as ort from 'onnxruntime-node'
import { parseLenientJson } from '../../framework/io/lenient-json.js'
import { halfToNumber } from './tensor-compare.js'

// The ways a client reaches a model over the Open Inference Protocol, written here as a client
// writes them (not with the server's own encoders): HTTP with JSON data, HTTP with binary data,
// gRPC with typed `contents`, gRPC with raw_input_contents. Each turns a tensor into a request and
// an answer back into tensors, to compare with what onnxruntime-node answers for the same inputs.

/** A tensor as onnxruntime-node has it: bool as a Uint8Array, float16 as raw half bits. */
export interface PathTensor {
  name: string
  dtype: string
  shape: number[]
  data: ArrayLike<number | bigint> | string[]
}

export const DATATYPE: Record<string, string> = {
  bool: 'BOOL',
  uint8: 'UINT8',
  uint16: 'UINT16',
  uint32: 'UINT32',
  uint64: 'UINT64',
  int8: 'INT8',
  int16: 'INT16',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
  float32: 'FP32',
  float64: 'FP64',
  string: 'BYTES',
}
const DTYPE = Object.fromEntries(Object.entries(DATATYPE).map(([k, v]) => [v, k])) as Record<string, string>

const ARRAYS: Record<string, { new (b: ArrayBuffer): ArrayLike<number | bigint> }> = {
  bool: Uint8Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  float16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
}

/** A JSON number as Python's json.dumps writes one: NaN and Infinity as tokens, integers exact. */
function jsonValue(dtype: string, v: number | bigint | string): string {
  if (typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'bigint') return v.toString()
  if (dtype === 'bool') return v ? 'true' : 'false'
  const n = dtype === 'float16' ? halfToNumber(v) : v
  if (Number.isNaN(n)) return 'NaN'
  if (n === Infinity) return 'Infinity'
  if (n === -Infinity) return '-Infinity'
  return Object.is(n, -0) ? '-0.0' : String(n)
}

/** The raw little-endian bytes of a tensor (strings: each a 4-byte length and its UTF-8 bytes). */
export function rawBytes(t: PathTensor): Buffer {
  if (t.dtype === 'string') {
    const parts = (t.data as string[]).flatMap((s) => {
      const b = Buffer.from(s, 'utf8')
      const len = Buffer.alloc(4)
      len.writeUInt32LE(b.byteLength)
      return [len, b]
    })
    return Buffer.concat(parts)
  }
  const view = t.data as unknown as ArrayBufferView
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength)
}

/** A tensor from raw bytes (the binary extension's and raw_output_contents' layout). */
export function fromRaw(name: string, datatype: string, shape: number[], bytes: Uint8Array): PathTensor {
  const dtype = DTYPE[datatype]!
  if (dtype === 'string') {
    const b = Buffer.from(bytes)
    const data: string[] = []
    for (let at = 0; at < b.byteLength; ) {
      const n = b.readUInt32LE(at)
      data.push(b.toString('utf8', at + 4, at + 4 + n))
      at += 4 + n
    }
    return { name, dtype, shape, data }
  }
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return { name, dtype, shape, data: new ARRAYS[dtype]!(copy.buffer) }
}

/** A tensor's values as the text of a flat JSON array, as Python's json writes them. */
export function jsonData(t: PathTensor): string {
  return `[${Array.from(t.data as ArrayLike<number | bigint | string>, (v) => jsonValue(t.dtype, v)).join(',')}]`
}

/** An infer request with every input's data in JSON (`outputs` asked as JSON too). */
export function jsonRequest(inputs: readonly PathTensor[]): string {
  const items = inputs.map(
    (t) =>
      `{"name":${JSON.stringify(t.name)},"datatype":"${DATATYPE[t.dtype]}","shape":${JSON.stringify(t.shape)},` +
      `"data":${jsonData(t)}}`,
  )
  return `{"inputs":[${items.join(',')}]}`
}

/** An infer request with binary inputs, answered in binary, as Triton's HTTP client sends one. */
export function binaryRequest(inputs: readonly PathTensor[]): { body: Buffer; headers: Record<string, string> } {
  const bytes = inputs.map(rawBytes)
  const header = JSON.stringify({
    inputs: inputs.map((t, i) => ({
      name: t.name,
      datatype: DATATYPE[t.dtype],
      shape: t.shape,
      parameters: { binary_data_size: bytes[i]!.byteLength },
    })),
    parameters: { binary_data_output: true },
  })
  const head = Buffer.from(header)
  return {
    body: Buffer.concat([head, ...bytes]),
    headers: { 'inference-header-content-length': String(head.byteLength) },
  }
}

/** The outputs of an HTTP infer answer, JSON or binary (located by binary_data_size, in order). */
export function httpAnswer(body: Buffer, headerLength: string | null): PathTensor[] {
  const end = headerLength === null ? body.byteLength : Number(headerLength)
  const doc = parseLenientJson(body.subarray(0, end).toString('utf8')) as {
    outputs: {
      name: string
      datatype: string
      shape: number[]
      data?: unknown[]
      parameters?: Record<string, number>
    }[]
  }
  let at = end
  return doc.outputs.map((o) => {
    const size = o.parameters?.binary_data_size
    if (size !== undefined) {
      const t = fromRaw(o.name, o.datatype, o.shape, body.subarray(at, at + size))
      at += size
      return t
    }
    const dtype = DTYPE[o.datatype]!
    const data = (o.data ?? []).map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : v)) as (number | bigint)[]
    // JSON gives FP16 as numbers: compared as numbers, not as bits.
    return { name: o.name, dtype: dtype === 'float16' ? 'float64' : dtype, shape: o.shape, data }
  })
}

/** gRPC typed contents of a tensor (no FP16: it has no typed list and travels raw only). */
export function grpcContents(t: PathTensor): Record<string, unknown> {
  const list = Array.from(t.data as ArrayLike<number | bigint | string>)
  switch (t.dtype) {
    case 'bool':
      return { bool_contents: list.map((v) => v !== 0) }
    case 'int8':
    case 'int16':
    case 'int32':
      return { int_contents: list }
    case 'int64':
      return { int64_contents: list.map(String) }
    case 'uint8':
    case 'uint16':
    case 'uint32':
      return { uint_contents: list }
    case 'uint64':
      return { uint64_contents: list.map(String) }
    case 'float32':
      return { fp32_contents: list }
    case 'float64':
      return { fp64_contents: list }
    case 'string':
      return { bytes_contents: list.map((s) => Buffer.from(s as string, 'utf8')) }
  }
  throw new Error(`${t.dtype} has no typed contents`)
}

/** A ModelInferRequest with typed contents or raw_input_contents. */
export function grpcRequest(model: string, inputs: readonly PathTensor[], raw: boolean): Record<string, unknown> {
  return {
    model_name: model,
    inputs: inputs.map((t) => ({
      name: t.name,
      datatype: DATATYPE[t.dtype],
      shape: t.shape.map(String),
      ...(raw ? {} : { contents: grpcContents(t) }),
    })),
    ...(raw ? { raw_input_contents: inputs.map(rawBytes) } : {}),
  }
}

/** The outputs of a ModelInferResponse (raw_output_contents, in output order). */
export function grpcAnswer(res: {
  outputs: { name: string; datatype: string; shape: (string | number)[] }[]
  raw_output_contents: Buffer[]
}): PathTensor[] {
  return res.outputs.map((o, i) => fromRaw(o.name, o.datatype, o.shape.map(Number), res.raw_output_contents[i]!))
}

/** What onnxruntime-node itself answers for the model and inputs: the reference. */
export async function rawAnswer(model: Uint8Array | string, inputs: readonly PathTensor[]): Promise<PathTensor[]> {
  const session = await ort.InferenceSession.create(model as Uint8Array)
  try {
    const feeds = Object.fromEntries(
      inputs.map((t) => [t.name, new ort.Tensor(t.dtype as never, t.data as never, t.shape)]),
    )
    const out = await session.run(feeds)
    return session.outputNames.map((name) => {
      const t = out[name]!
      return { name, dtype: t.type, shape: [...t.dims], data: t.data as PathTensor['data'] }
    })
  } finally {
    await session.release()
  }
}
