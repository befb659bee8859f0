import { writeFileSync } from 'node:fs'

// Tiny real ONNX models for tests, encoded by hand (the protobuf wire format is small enough):
// any layout, dtype or number of inputs a test needs, run by the real onnxruntime.

const ELEM_TYPES = {
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

export type OnnxDType = keyof typeof ELEM_TYPES

export interface ValueSpec {
  name: string
  dtype: OnnxDType
  /** A number is a fixed size; a string names a variable dimension. */
  dims: (number | string)[]
}

export interface NodeSpec {
  op: string
  inputs: string[]
  outputs: string[]
}

function varint(n: number): number[] {
  const out: number[] = []
  let v = n
  while (v > 127) {
    out.push((v & 127) | 128)
    v = Math.floor(v / 128)
  }
  out.push(v)
  return out
}

const field = (num: number, wire: number) => varint((num << 3) | wire)
const int = (num: number, v: number) => [...field(num, 0), ...varint(v)]
const bytes = (num: number, b: number[] | Uint8Array) => [...field(num, 2), ...varint(b.length), ...b]
const str = (num: number, s: string) => bytes(num, new TextEncoder().encode(s))

function valueInfo(v: ValueSpec): number[] {
  const dims = v.dims.flatMap((d) => bytes(1, typeof d === 'number' ? int(1, d) : str(2, d)))
  const tensorType = [...int(1, ELEM_TYPES[v.dtype]), ...bytes(2, dims)]
  return [...str(1, v.name), ...bytes(2, bytes(1, tensorType))]
}

/** Encodes a one-graph model (opset 13). */
export function onnxModel(graph: { nodes: NodeSpec[]; inputs: ValueSpec[]; outputs: ValueSpec[] }): Uint8Array {
  const nodes = graph.nodes.flatMap((n) =>
    bytes(1, [...n.inputs.flatMap((i) => str(1, i)), ...n.outputs.flatMap((o) => str(2, o)), ...str(4, n.op)]),
  )
  const g = [
    ...nodes,
    ...str(2, 'g'),
    ...graph.inputs.flatMap((i) => bytes(11, valueInfo(i))),
    ...graph.outputs.flatMap((o) => bytes(12, valueInfo(o))),
  ]
  return new Uint8Array([...int(1, 7), ...bytes(8, [...str(1, ''), ...int(2, 13)]), ...bytes(7, g)])
}

export function writeOnnxModel(path: string, graph: Parameters<typeof onnxModel>[0]): string {
  writeFileSync(path, onnxModel(graph))
  return path
}
