import onnxProto from 'onnx-proto'

// Encodes ONNX models through onnx-proto's generated ModelProto. onnx-builder.ts writes the wire
// bytes by hand, which is enough for plain graphs; attributes, subgraphs (If branches) and
// initializers need the full schema, and a generated encoder cannot get a field number wrong.

const { onnx } = onnxProto
type IGraphProto = onnxProto.onnx.IGraphProto
type INodeProto = onnxProto.onnx.INodeProto
type ITensorProto = onnxProto.onnx.ITensorProto
type IValueInfoProto = onnxProto.onnx.IValueInfoProto
type IAttributeProto = onnxProto.onnx.IAttributeProto

/** onnxruntime-node dtype names → TensorProto.DataType numbers. */
export const ELEM_TYPE = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  string: 8,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
} as const

export type DType = keyof typeof ELEM_TYPE

/** A number is a fixed size (dim_value); a string names a symbolic dimension (dim_param). */
export type Dim = number | string

/** Tensor data as onnxruntime-node takes it: bool is a Uint8Array, float16 raw half bits in a Uint16Array. */
export type TensorData =
  | Float32Array
  | Float64Array
  | Uint16Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint32Array
  | BigUint64Array
  | string[]

/** A graph input or output: name, element type and declared shape. */
export interface Value {
  name: string
  dtype: DType
  dims: Dim[]
}

export interface GraphSpec {
  name?: string
  nodes: INodeProto[]
  inputs: Value[]
  outputs: Value[]
  initializers?: ITensorProto[]
}

export function valueInfo(v: Value): IValueInfoProto {
  const dim = v.dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d }))
  return { name: v.name, type: { tensorType: { elemType: ELEM_TYPE[v.dtype], shape: { dim } } } }
}

/**
 * A node. Attributes are ints (keepdims, periodic, …) or graphs (If branches): the only kinds the
 * conformance models need. The type field is set because onnxruntime rejects untyped attributes.
 * @example node('ReduceSum', ['x', 'axes'], ['y'], { keepdims: 0 })
 */
export function node(
  op: string,
  inputs: string[],
  outputs: string[],
  attrs: Record<string, number | IGraphProto> = {},
) {
  const { INT, GRAPH } = onnx.AttributeProto.AttributeType
  const attribute: IAttributeProto[] = Object.entries(attrs).map(([name, v]) =>
    typeof v === 'number' ? { name, type: INT, i: v } : { name, type: GRAPH, g: v },
  )
  return { name: `${op}_${outputs[0]}`, opType: op, input: inputs, output: outputs, attribute } satisfies INodeProto
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

/** ONNX raw_data is little-endian whatever the host: copy the bytes, swapping each element on a big-endian host. */
function rawBytes(data: Exclude<TensorData, string[]>): Uint8Array {
  const bytes = new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength))
  const size = data.BYTES_PER_ELEMENT
  if (!LITTLE_ENDIAN) for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse()
  return bytes
}

/**
 * A constant tensor: raw_data for numbers (exact for 64-bit values, where the typed int64_data
 * fields would need Long), string_data for strings.
 */
export function initializer(name: string, dtype: DType, dims: number[], data: TensorData): ITensorProto {
  const base = { name, dataType: ELEM_TYPE[dtype], dims }
  if (Array.isArray(data)) return { ...base, stringData: data.map((s) => new TextEncoder().encode(s)) }
  return { ...base, rawData: rawBytes(data) }
}

export function graph(spec: GraphSpec): IGraphProto {
  return {
    name: spec.name ?? 'g',
    node: spec.nodes,
    input: spec.inputs.map(valueInfo),
    output: spec.outputs.map(valueInfo),
    initializer: spec.initializers ?? [],
  }
}

/**
 * A one-graph model, IR version 8, default-domain opset 17 (the first with HannWindow).
 * IR ≥ 4 matters: from it on a graph input that also has an initializer is optional.
 * @example encodeModel({ nodes: [node('Identity', ['x'], ['y'])], inputs: [x], outputs: [y] })
 */
export function encodeModel(spec: GraphSpec, opset = 17): Uint8Array {
  const bytes = onnx.ModelProto.encode({
    irVersion: 8,
    producerName: 'modelbundle-conformance',
    opsetImport: [{ domain: '', version: opset }],
    graph: graph(spec),
  }).finish()
  // protobufjs may hand back a slice of Node's shared Buffer pool; a copy owns its memory.
  return new Uint8Array(bytes)
}
