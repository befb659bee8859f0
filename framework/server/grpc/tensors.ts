import { BundleError } from '../../../errors/index.js'
import { encodeStrings, parseClientPriority, type RunnerDType, type RunnerTensor } from '../../../runners/index.js'
import { valuesToTyped } from '../../io/tensor-values.js'
import {
  datatypeOf,
  fromBinary,
  protocolType,
  sequenceParameters,
  type InferInput,
  type InferRequest,
} from '../v2/codec.js'

// ModelInferRequest → the protocol's request (as the HTTP codec yields it), and results →
// ModelInferResponse. Messages are plain objects as @grpc/proto-loader gives them (keepCase,
// int64 as strings, bytes as Buffers, defaults filled in). Inputs come raw (one
// raw_input_contents entry per input) or as typed `contents`; answers always go raw, as
// Triton's server sends them, which costs no per-element conversion.

/** A parameter value of either map (InferParameter or ModelRepositoryParameter). */
export interface WireParameter {
  parameter_choice?: string
  bool_param?: boolean
  int64_param?: string
  string_param?: string
  double_param?: number
  uint64_param?: string
  bytes_param?: Buffer
}

export interface WireContents {
  bool_contents: boolean[]
  int_contents: number[]
  int64_contents: string[]
  uint_contents: number[]
  uint64_contents: string[]
  fp32_contents: number[]
  fp64_contents: number[]
  bytes_contents: Buffer[]
}

export interface WireInferRequest {
  model_name: string
  model_version: string
  id: string
  parameters: Record<string, WireParameter>
  inputs: {
    name: string
    datatype: string
    shape: string[]
    parameters: Record<string, WireParameter>
    contents: WireContents | null
  }[]
  outputs: { name: string; parameters: Record<string, WireParameter> }[]
  raw_input_contents: Buffer[]
}

export interface WireInferResponse {
  model_name: string
  model_version: string
  id: string
  outputs: { name: string; datatype: string; shape: number[] }[]
  raw_output_contents: Buffer[]
}

const bad = (msg: string) => new BundleError('E_INPUT_INVALID', msg)

/** A parameter's value, whichever of the oneof's fields is set. */
export function parameterValue(p: WireParameter | undefined): boolean | number | string | Buffer | undefined {
  switch (p?.parameter_choice) {
    case 'bool_param':
      return p.bool_param
    case 'int64_param':
      return Number(p.int64_param)
    case 'uint64_param':
      return Number(p.uint64_param)
    case 'double_param':
      return p.double_param
    case 'string_param':
      return p.string_param
    case 'bytes_param':
      return p.bytes_param
    default:
      return undefined
  }
}

/** The typed list a datatype travels in (FP16 has none). */
const CONTENTS: Record<string, keyof WireContents> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
}

const count = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1)

function fromContents(
  name: string,
  datatype: string,
  dtype: RunnerDType | 'string',
  shape: number[],
  contents: WireContents | null,
): RunnerTensor {
  const field = CONTENTS[datatype]
  if (field === undefined)
    throw bad(`input "${name}": ${datatype} has no typed contents; send it in raw_input_contents`)
  const values = (contents?.[field] ?? []) as unknown[]
  if (values.length !== count(shape))
    throw bad(
      `input "${name}": shape [${shape.join(',')}] needs ${count(shape)} values, contents.${field} has ` +
        `${values.length}`,
    )
  if (dtype === 'string')
    return { dtype, shape, data: (values as Buffer[]).map((b) => Buffer.from(b).toString('utf8')) }
  // Each value checked against its type (an INT8 of 300 is refused, not wrapped); 64-bit ones arrive as exact digits.
  return { dtype, shape, data: valuesToTyped(dtype, values, `input "${name}" (contents.${field})`) }
}

/** Reads a ModelInferRequest: inputs (raw or typed), requested outputs, timeout and priority. */
export function parseWireRequest(msg: WireInferRequest): InferRequest {
  const raw = msg.raw_input_contents
  if (raw.length > 0 && raw.length !== msg.inputs.length)
    throw bad(`raw_input_contents has ${raw.length} entries for ${msg.inputs.length} inputs (one per input, in order)`)
  const names = new Set<string>()
  const inputs = msg.inputs.map((input, i): InferInput => {
    const { name, datatype } = input
    if (!name) throw bad(`inputs[${i}] needs a name`)
    if (names.has(name)) throw bad(`input "${name}" is given twice`)
    names.add(name)
    const dtype = datatypeOf(name, datatype)
    const shape = input.shape.map(Number)
    if (shape.some((d) => !Number.isSafeInteger(d) || d < 0))
      throw bad(`input "${name}": shape must be non-negative integers`)
    if (raw.length > 0) {
      if (input.contents !== null && Object.values(input.contents).some((v) => (v as unknown[]).length > 0))
        throw bad(`input "${name}": both contents and raw_input_contents are set; send one`)
      const bytes = raw[i]!
      return { name, datatype, shape, decode: () => fromBinary(name, dtype, shape, bytes, `raw_input_contents[${i}]`) }
    }
    const contents = input.contents
    return { name, datatype, shape, decode: () => fromContents(name, datatype, dtype, shape, contents) }
  })
  const timeout = parameterValue(msg.parameters.timeout)
  if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 0))
    throw bad('parameters.timeout must be a whole number of microseconds')
  const priorityValue = parameterValue(msg.parameters.priority)
  if (priorityValue !== undefined && typeof priorityValue !== 'number')
    throw bad('parameters.priority must be an int64 or uint64 parameter')
  const priority = priorityValue === undefined ? undefined : parseClientPriority(priorityValue, 'parameters.priority')
  const sequence = sequenceParameters({
    id: sequenceId(msg.parameters.sequence_id),
    start: parameterValue(msg.parameters.sequence_start),
    end: parameterValue(msg.parameters.sequence_end),
  })
  return {
    ...(msg.id ? { id: msg.id } : {}),
    inputs,
    ...(msg.outputs.length ? { outputs: msg.outputs.map((o) => ({ name: o.name, binary: true })) } : {}),
    binaryOutput: true,
    ...(typeof timeout === 'number' && timeout > 0 ? { timeoutMs: timeout / 1000 } : {}),
    ...(priority !== undefined ? { priority } : {}),
    ...(sequence ? { sequence } : {}),
  }
}

/**
 * sequence_id as Triton's clients send it (uint64, int64 or string), kept exact: an integer past
 * 2^53 would name another sequence as a number, so it is refused rather than rounded.
 */
function sequenceId(p: WireParameter | undefined): unknown {
  const digits =
    p?.parameter_choice === 'uint64_param'
      ? p.uint64_param
      : p?.parameter_choice === 'int64_param'
        ? p.int64_param
        : undefined
  if (digits === undefined) return parameterValue(p)
  const n = Number(digits)
  if (!Number.isSafeInteger(n)) throw bad(`parameters.sequence_id ${digits} is past 2^53; send it as a string_param`)
  return n
}

/** A tensor's raw bytes, as raw_output_contents carries them (no copy for numeric tensors). */
function rawBytes(t: RunnerTensor): Buffer {
  if (t.dtype === 'string') return Buffer.from(encodeStrings(t.data))
  const view = t.data as ArrayBufferView
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength)
}

export function wireResponse(
  model: { name: string; version: string },
  id: string | undefined,
  outputs: { name: string; tensor: RunnerTensor }[],
): WireInferResponse {
  return {
    model_name: model.name,
    model_version: model.version,
    id: id ?? '',
    outputs: outputs.map((o) => ({ name: o.name, datatype: protocolType(o.tensor.dtype), shape: o.tensor.shape })),
    raw_output_contents: outputs.map((o) => rawBytes(o.tensor)),
  }
}
