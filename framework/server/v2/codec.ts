import { parseClientPriority } from '../../../runners/index.js'
import { BundleError } from '../../../errors/index.js'
import {
  TYPED_ARRAYS,
  decodeStrings,
  encodeStrings,
  type NumericTensor,
  type RunnerDType,
  type RunnerTensor,
} from '../../../runners/index.js'
import { parseTensorJson } from '../../io/lenient-json.js'
import { valuesToJson, valuesToTyped } from '../../io/tensor-values.js'

// Open Inference Protocol (KServe v2) tensors in JSON and with the binary tensor data extension:
// a request body is a JSON object, optionally followed by the raw little-endian bytes of the
// inputs whose `parameters.binary_data_size` says so, in input order; the JSON's length is the
// `Inference-Header-Content-Length` header. Responses mirror it.

/** Protocol datatype ↔ runner dtype (BYTES: strings, each a 4-byte length and its bytes in binary). */
export const DATATYPES: Record<string, RunnerDType | 'string'> = {
  BYTES: 'string',
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
}

const TO_PROTOCOL = Object.fromEntries(Object.entries(DATATYPES).map(([k, v]) => [v, k])) as Record<string, string>

/** The protocol datatype of a runner dtype (`float32` → `FP32`; `string` → `BYTES`). */
export const protocolType = (dtype: string): string =>
  TO_PROTOCOL[dtype] ?? (dtype === 'string' ? 'BYTES' : dtype.toUpperCase())

const bad = (msg: string) => new BundleError('E_INPUT_INVALID', msg)

/** The runner dtype of a protocol datatype; BF16 is named apart (onnxruntime-node has no bfloat16 tensors). */
export function datatypeOf(name: string, datatype: string): RunnerDType | 'string' {
  const dtype = DATATYPES[datatype]
  if (dtype !== undefined) return dtype
  if (datatype === 'BF16') throw bad(`input "${name}": BF16 cannot be served: onnxruntime-node has no bfloat16 tensors`)
  throw bad(`input "${name}": unknown datatype ${JSON.stringify(datatype)} (use ${Object.keys(DATATYPES).join(', ')})`)
}

export interface InferInput {
  name: string
  datatype: string
  shape: number[]
  /**
   * The input's values as a tensor. Called only after the input's name, datatype and shape have
   * been checked against the model (models.ts check()), so a wrong name or rank is reported as
   * such, not as a value count that follows from it.
   */
  decode: () => RunnerTensor
}

export interface InferRequest {
  id?: string
  inputs: InferInput[]
  /** Requested outputs (all when undefined), each with whether it goes back as binary. */
  outputs?: { name: string; binary: boolean | undefined }[]
  binaryOutput: boolean
  /** The client's timeout in ms (the protocol's `timeout` parameter is in microseconds). */
  timeoutMs?: number
  /** The protocol's `priority` parameter: 1 is the most urgent, 0 the default. */
  priority?: number
  /** Triton's sequence parameters (sequence_id, sequence_start, sequence_end), for stateful models. */
  sequence?: { id: string | number; start: boolean; end: boolean }
}

/**
 * Triton's sequence parameters as the request gave them (undefined: not given). A sequence_id of
 * 0 or "" means none, as in Triton; sequence_start and sequence_end need one.
 */
export function sequenceParameters(p: { id: unknown; start: unknown; end: unknown }): InferRequest['sequence'] {
  const flag = (v: unknown, name: string): boolean => {
    if (v === undefined) return false
    if (typeof v !== 'boolean') throw bad(`parameters.${name} must be true or false`)
    return v
  }
  const start = flag(p.start, 'sequence_start')
  const end = flag(p.end, 'sequence_end')
  const { id } = p
  if (
    id !== undefined &&
    !(typeof id === 'string' && id.length <= 256) &&
    !(Number.isSafeInteger(id) && (id as number) >= 0)
  )
    throw bad('parameters.sequence_id must be an unsigned integer below 2^53 or a string of at most 256 characters')
  if (id === undefined || id === 0 || id === '') {
    if (start || end) throw bad('parameters.sequence_start and sequence_end need a parameters.sequence_id')
    return undefined
  }
  return { id: id as string | number, start, end }
}

const count = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1)

/** Flattens row-major nested arrays, iteratively (hostile nesting depth is a 400, not a crash). */
function flatten(data: unknown[]): unknown[] {
  const out: unknown[] = []
  const stack: unknown[][] = [data]
  const index: number[] = [0]
  while (stack.length) {
    const top = stack[stack.length - 1]!
    const i = index[index.length - 1]!
    if (i >= top.length) {
      stack.pop()
      index.pop()
      continue
    }
    index[index.length - 1] = i + 1
    const v = top[i]
    if (Array.isArray(v)) {
      if (stack.length > 64) throw bad('tensor data is nested more than 64 deep')
      stack.push(v)
      index.push(0)
    } else out.push(v)
  }
  return out
}

/** An input's JSON `data`: flat or nested arrays, row-major; a scalar (shape []) may also be the bare value. */
function jsonValues(name: string, shape: number[], data: unknown): unknown[] {
  if (shape.length === 0 && !Array.isArray(data) && data !== undefined) return [data]
  if (!Array.isArray(data)) throw bad(`input "${name}": data must be an array (flat or nested, row-major)`)
  const values = flatten(data)
  if (values.length !== count(shape))
    throw bad(`input "${name}": shape [${shape.join(',')}] needs ${count(shape)} values, data has ${values.length}`)
  return values
}

function fromJson(name: string, dtype: RunnerDType | 'string', shape: number[], data: unknown): RunnerTensor {
  const values = jsonValues(name, shape, data)
  if (dtype === 'string') {
    const bad1 = values.findIndex((v) => typeof v !== 'string')
    if (bad1 >= 0) throw bad(`input "${name}": BYTES data[${bad1}] is ${JSON.stringify(values[bad1])}, not a string`)
    return { dtype: 'string', shape, data: values as string[] }
  }
  return { dtype, shape, data: valuesToTyped(dtype, values, `input "${name}"`) }
}

/** A tensor from its raw little-endian bytes: binary data over HTTP, raw contents over gRPC. */
export function fromBinary(
  name: string,
  dtype: RunnerDType | 'string',
  shape: number[],
  bytes: Uint8Array,
  /** What the protocol calls these bytes, for messages: HTTP's binary_data_size, gRPC's raw_input_contents[i]. */
  field = 'binary_data_size',
): RunnerTensor {
  if (dtype === 'string') {
    const values = decodeStrings(bytes)
    if (values === undefined)
      throw bad(`input "${name}": BYTES ${field} is not a sequence of 4-byte lengths and their bytes`)
    if (values.length !== count(shape))
      throw bad(
        `input "${name}": shape [${shape.join(',')}] needs ${count(shape)} BYTES elements, ${field} holds ` +
          `${values.length}`,
      )
    return { dtype: 'string', shape, data: values }
  }
  const Ctor = TYPED_ARRAYS[dtype]
  const expected = count(shape) * Ctor.BYTES_PER_ELEMENT
  if (bytes.byteLength !== expected)
    throw bad(
      `input "${name}": ${field} has ${bytes.byteLength} bytes; shape [${shape.join(',')}] of ` +
        `${protocolType(dtype)} needs ${expected}`,
    )
  const aligned = new Uint8Array(bytes.byteLength) // the body offset may not suit the element size
  aligned.set(bytes)
  return { dtype, shape, data: new Ctor(aligned.buffer) as NumericTensor['data'] }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The request's JSON head: the whole body, or its first `headerLength` bytes (binary tensor data follows). */
function inferenceHeader(body: Uint8Array, headerLength: string | undefined): { doc: unknown; jsonEnd: number } {
  let jsonEnd = body.byteLength
  if (headerLength !== undefined) {
    if (!/^\d+$/.test(headerLength.trim()) || Number(headerLength) > body.byteLength)
      throw bad(
        `Inference-Header-Content-Length ${headerLength} is not a length within the ${body.byteLength}-byte body`,
      )
    jsonEnd = Number(headerLength)
  }
  try {
    // Exact 64-bit integers and NaN/Infinity tokens survive (lenient-json.ts); other bodies parse natively.
    return { doc: parseTensorJson(Buffer.from(body.buffer, body.byteOffset, jsonEnd).toString('utf8')), jsonEnd }
  } catch (err) {
    const why = (err as Error).message.replace(/^the body is not valid JSON: /, '')
    throw bad(
      headerLength === undefined
        ? `the body is not valid JSON (${why}); a body with binary tensor data needs an ` +
            'Inference-Header-Content-Length header'
        : `the inference header is not valid JSON (${why})`,
    )
  }
}

/** The inputs, each decoded on demand from its JSON data or its slice of the binary data after the header. */
function inferInputs(raws: unknown[], body: Uint8Array, jsonEnd: number): InferInput[] {
  let offset = jsonEnd
  const names = new Set<string>()
  const inputs = raws.map((raw: unknown, i: number): InferInput => {
    if (!isObject(raw)) throw bad(`inputs[${i}] must be an object`)
    const { name, datatype, shape } = raw
    if (typeof name !== 'string' || name === '') throw bad(`inputs[${i}] needs a "name"`)
    if (names.has(name)) throw bad(`input "${name}" is given twice`)
    names.add(name)
    if (typeof datatype !== 'string') throw bad(`input "${name}" needs a "datatype"`)
    const dtype = datatypeOf(name, datatype)
    if (!Array.isArray(shape) || shape.some((d) => !Number.isSafeInteger(d) || d < 0))
      throw bad(`input "${name}": shape must be an array of non-negative integers`)
    const params = isObject(raw.parameters) ? raw.parameters : {}
    const size = params.binary_data_size
    if (size !== undefined) {
      if (!Number.isSafeInteger(size) || (size as number) < 0)
        throw bad(`input "${name}": binary_data_size must be a non-negative integer`)
      if (offset + (size as number) > body.byteLength)
        throw bad(`input "${name}": binary_data_size ${size} runs past the end of the body`)
      const bytes = body.subarray(offset, offset + (size as number))
      offset += size as number
      const dims = shape as number[]
      return { name, datatype, shape: dims, decode: () => fromBinary(name, dtype, dims, bytes) }
    }
    const data = raw.data
    return { name, datatype, shape: shape as number[], decode: () => fromJson(name, dtype, shape as number[], data) }
  })
  if (offset !== body.byteLength)
    throw bad(`the body has ${body.byteLength - offset} bytes of binary data no input claims`)
  return inputs
}

/** The request's `parameters`: Triton's timeout in microseconds (0: none), priority 1… (0: the default), sequence. */
function requestParameters(
  doc: Record<string, unknown>,
): Pick<InferRequest, 'binaryOutput' | 'timeoutMs' | 'priority' | 'sequence'> {
  const params = isObject(doc.parameters) ? doc.parameters : {}
  const timeout = params.timeout
  if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 0))
    throw bad('parameters.timeout must be a whole number of microseconds')
  const priority =
    params.priority === undefined ? undefined : parseClientPriority(params.priority as number, 'parameters.priority')
  const sequence = sequenceParameters({
    id: params.sequence_id,
    start: params.sequence_start,
    end: params.sequence_end,
  })
  return {
    binaryOutput: params.binary_data_output === true,
    ...(typeof timeout === 'number' && timeout > 0 ? { timeoutMs: timeout / 1000 } : {}),
    ...(priority !== undefined ? { priority } : {}),
    ...(sequence ? { sequence } : {}),
  }
}

/** Parses an infer request body; `headerLength` is Inference-Header-Content-Length, when sent. */
export function parseInferRequest(body: Uint8Array, headerLength: string | undefined): InferRequest {
  const { doc, jsonEnd } = inferenceHeader(body, headerLength)
  if (!isObject(doc)) throw bad('the inference request must be a JSON object')
  // Empty only for a model that takes no inputs (the model's own check says which it takes).
  if (!Array.isArray(doc.inputs)) throw bad('the inference request needs an "inputs" array')
  const inputs = inferInputs(doc.inputs, body, jsonEnd)
  let outputs: InferRequest['outputs']
  if (doc.outputs !== undefined) {
    if (!Array.isArray(doc.outputs)) throw bad('"outputs" must be an array')
    outputs = doc.outputs.map((o: unknown, i: number) => {
      if (!isObject(o) || typeof o.name !== 'string') throw bad(`outputs[${i}] needs a "name"`)
      const binary = isObject(o.parameters) ? o.parameters.binary_data : undefined
      return { name: o.name, binary: typeof binary === 'boolean' ? binary : undefined }
    })
  }
  const id = doc.id === undefined ? undefined : String(doc.id)
  return { ...(id !== undefined ? { id } : {}), inputs, ...(outputs ? { outputs } : {}), ...requestParameters(doc) }
}

/**
 * Encodes the response: JSON, or JSON followed by the binary outputs (with the JSON's length).
 * JSON data loses nothing (tensor-values.ts): exact 64-bit integers, NaN and ±Infinity tokens,
 * half precision as numbers. The shape is the one the runtime produced, checked against the data.
 */
export function encodeInferResponse(
  model: { name: string; version: string },
  id: string | undefined,
  outputs: { name: string; tensor: RunnerTensor; binary: boolean }[],
): { body: Uint8Array | string; headers: Record<string, string> } {
  const binaries: Uint8Array[] = []
  const json = outputs.map(({ name, tensor, binary }) => {
    const elements = tensor.dtype === 'string' ? tensor.data.length : (tensor.data as ArrayLike<unknown>).length
    if (elements !== count(tensor.shape))
      throw new BundleError(
        'E_OUTPUT_INVALID',
        `output "${name}" has ${elements} values under shape [${tensor.shape.join(',')}]`,
      )
    const head =
      `{"name":${JSON.stringify(name)},"datatype":"${protocolType(tensor.dtype)}",` +
      `"shape":[${tensor.shape.join(',')}]`
    if (!binary) return `${head},"data":${valuesToJson(tensor)}}`
    const bytes =
      tensor.dtype === 'string'
        ? encodeStrings(tensor.data)
        : new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength)
    binaries.push(bytes)
    return `${head},"parameters":{"binary_data_size":${bytes.byteLength}}}`
  })
  const header =
    `{"model_name":${JSON.stringify(model.name)},"model_version":${JSON.stringify(model.version)},` +
    `${id !== undefined ? `"id":${JSON.stringify(id)},` : ''}"outputs":[${json.join(',')}]}`
  if (binaries.length === 0) return { body: header, headers: { 'content-type': 'application/json' } }
  const head = Buffer.from(header)
  const body = Buffer.concat([head, ...binaries])
  return {
    body,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.byteLength) },
  }
}
