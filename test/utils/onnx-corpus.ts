import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import onnxProto from 'onnx-proto'
import { difference, ONNX_BACKEND } from './tensor-compare.js'
import { type PathTensor, rawAnswer } from './v2-paths.js'

// The ONNX backend test layout: a directory per case holding model.onnx and test_data_set_N/
// with input_K.pb and output_K.pb (serialized TensorProto). Debian's libonnx-testdata ships the
// operator ("node") cases and small networks in this layout; so does the onnx repository.

const { onnx } = onnxProto

/** A tensor as the corpus gives it: runner dtype names, row-major data. */
export interface CorpusTensor {
  name: string
  dtype: string
  shape: number[]
  data: ArrayLike<number | bigint> | string[]
}

export interface CorpusCase {
  /** The case's path under the corpus root, e.g. node/test_abs. */
  id: string
  model: string
  inputs: CorpusTensor[]
  outputs: CorpusTensor[]
}

/** ONNX TensorProto.DataType → the dtype names onnxruntime-node uses. */
export const ELEM_DTYPES: Record<number, string> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  4: 'uint16',
  5: 'int16',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  12: 'uint32',
  13: 'uint64',
  14: 'complex64',
  15: 'complex128',
  16: 'bfloat16',
}

const ARRAYS: Record<string, { new (n: number): ArrayLike<number | bigint> & ArrayBufferView }> = {
  float32: Float32Array,
  uint8: Uint8Array,
  int8: Int8Array,
  uint16: Uint16Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  bool: Uint8Array,
  float16: Uint16Array,
  float64: Float64Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  bfloat16: Uint16Array,
}

const toNumber = (v: unknown): number => (typeof v === 'number' ? v : Number(String(v)))
const toBig = (v: unknown, unsigned: boolean): bigint => {
  // protobufjs hands 64-bit fields as Long objects (or numbers when they fit).
  if (typeof v === 'number') return BigInt(v)
  const l = v as { toString(): string; unsigned?: boolean }
  const b = BigInt(l.toString())
  return unsigned ? BigInt.asUintN(64, b) : BigInt.asIntN(64, b)
}

/** A serialized TensorProto as a CorpusTensor (raw_data or the typed fields). */
export function readTensor(bytes: Uint8Array): CorpusTensor {
  const t = onnx.TensorProto.decode(bytes)
  const dtype = ELEM_DTYPES[t.dataType] ?? `elem-type-${t.dataType}`
  const shape = t.dims.map(toNumber)
  const n = shape.reduce((a, b) => a * b, 1)
  if (dtype === 'string')
    return { name: t.name, dtype, shape, data: t.stringData.map((b) => Buffer.from(b).toString('utf8')) }
  const Ctor = ARRAYS[dtype]
  if (Ctor === undefined) return { name: t.name, dtype, shape, data: [] }
  if (t.rawData && t.rawData.byteLength > 0) {
    const copy = new Uint8Array(t.rawData.byteLength)
    copy.set(t.rawData)
    const per = (Ctor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT
    const C = Ctor as unknown as new (b: ArrayBuffer, o: number, n: number) => ArrayLike<number | bigint>
    return { name: t.name, dtype, shape, data: new C(copy.buffer, 0, copy.byteLength / per) }
  }
  const out = new Ctor(n) as unknown as (number | bigint)[]
  const src: unknown[] =
    dtype === 'float32'
      ? t.floatData
      : dtype === 'float64'
        ? t.doubleData
        : dtype === 'int64'
          ? t.int64Data
          : dtype === 'uint32' || dtype === 'uint64'
            ? t.uint64Data
            : t.int32Data
  for (let i = 0; i < n; i++) {
    const v = src[i]
    out[i] = dtype === 'int64' || dtype === 'uint64' ? toBig(v, dtype === 'uint64') : toNumber(v)
  }
  return { name: t.name, dtype, shape, data: out as unknown as ArrayLike<number> }
}

/** The graph's declared inputs (less those an initializer gives) and outputs, in order. */
export function graphNames(modelBytes: Uint8Array): { inputs: string[]; outputs: string[] } {
  const m = onnx.ModelProto.decode(modelBytes)
  const inits = new Set((m.graph?.initializer ?? []).map((i) => i.name))
  return {
    inputs: (m.graph?.input ?? []).map((i) => i.name ?? '').filter((n) => !inits.has(n)),
    outputs: (m.graph?.output ?? []).map((o) => o.name ?? ''),
  }
}

function numbered(dir: string, prefix: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith(prefix) && f.endsWith('.pb'))
    .sort((a, b) => Number(a.slice(prefix.length, -3)) - Number(b.slice(prefix.length, -3)))
    .map((f) => join(dir, f))
}

/** Every case under `root` (its first data set), in path order. */
export function listCases(root: string): string[] {
  const out: string[] = []
  const walk = (dir: string) => {
    if (existsSync(join(dir, 'model.onnx'))) return void out.push(dir)
    for (const e of readdirSync(dir).sort()) {
      const p = join(dir, e)
      if (statSync(p).isDirectory()) walk(p)
    }
  }
  walk(root)
  return out
}

/** One case: the model, and its first data set's inputs and outputs named as the graph names them. */
export function readCase(root: string, dir: string): CorpusCase | undefined {
  const sets = readdirSync(dir)
    .filter((d) => d.startsWith('test_data_set_'))
    .sort()
  if (sets.length === 0) return undefined
  const set = join(dir, sets[0]!)
  const model = join(dir, 'model.onnx')
  const names = graphNames(readFileSync(model))
  const read = (files: string[], declared: string[]) =>
    files.map((f, i) => {
      const t = readTensor(readFileSync(f))
      return { ...t, name: t.name || declared[i] || `#${i}` }
    })
  return {
    id: relative(root, dir),
    model,
    inputs: read(numbered(set, 'input_'), names.inputs),
    outputs: read(numbered(set, 'output_'), names.outputs),
  }
}

/**
 * onnxruntime-node's own answer to a case when it is correct (within the corpus's tolerance of
 * the expected outputs): the reference a server must equal bit for bit. undefined: onnxruntime
 * cannot run the case, or answers it wrongly, so it says nothing about serving.
 */
export async function ortReference(c: CorpusCase): Promise<PathTensor[] | undefined> {
  const outputs = await rawAnswer(c.model, c.inputs as PathTensor[]).catch(() => undefined)
  if (!outputs?.length) return undefined
  const correct = c.outputs.every((e) => {
    const got = outputs.find((o) => o.name === e.name)
    return got !== undefined && difference(got as never, e as never, ONNX_BACKEND) === undefined
  })
  return correct ? outputs : undefined
}
