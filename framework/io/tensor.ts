import { BundleError } from '../../errors/index.js'
import { decodeStrings, encodeStrings, TYPED_ARRAYS, type RunnerDType } from '../../runners/index.js'
import { parseTensorJson } from './lenient-json.js'
import { valuesToJson, valuesToTyped } from './tensor-values.js'
import { baseMediaType, withBytes, type IODescriptor, type RequestBody } from './types.js'

const ARRAYS = TYPED_ARRAYS

/** Numeric dtypes (typed arrays) and `string` (the protocol's BYTES: a string[]). */
export type DType = RunnerDType | 'string'
export type TypedArrayOf<D extends DType> = D extends RunnerDType ? InstanceType<(typeof ARRAYS)[D]> : string[]
export const DTYPES = [...Object.keys(ARRAYS), 'string'] as DType[]

/** A dense, row-major tensor. */
export interface Tensor<D extends DType = DType> {
  dtype: D
  shape: number[]
  data: TypedArrayOf<D>
}

export const SHAPE_HEADER = 'x-tensor-shape'
export const DTYPE_HEADER = 'x-tensor-dtype'

const invalid = (msg: string) => new BundleError('E_INPUT_INVALID', msg)

function checkShape(shape: unknown, declared: readonly number[] | undefined): number[] {
  if (!Array.isArray(shape) || shape.some((d) => !Number.isSafeInteger(d) || d < 0))
    throw invalid('tensor shape must be an array of non-negative integers')
  if (declared) {
    const ok = shape.length === declared.length && declared.every((d, i) => d === -1 || d === shape[i])
    if (!ok)
      throw invalid(`tensor shape [${shape.join(',')}] does not match the declared [${declared.join(',')}] (-1 = any)`)
  }
  return shape as number[]
}

const count = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1)

/**
 * Flattens row-major `data`, flat or nested exactly `shape.length` deep with matching lengths.
 * Iterative: a hostile body nested 200 000 deep must be a 400, not a stack overflow.
 */
function flatten(data: unknown[], shape: readonly number[]): unknown[] {
  if (!data.some(Array.isArray)) return data // flat
  const out: unknown[] = []
  const stack: { items: unknown[]; depth: number; i: number }[] = [{ items: data, depth: 0, i: 0 }]
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    if (top.i === 0 && top.items.length !== shape[top.depth])
      throw invalid(
        `tensor data is not rectangular: expected ${shape[top.depth]} items at depth ${top.depth}, got ` +
          `${top.items.length}`,
      )
    if (top.i === top.items.length) {
      stack.pop()
      continue
    }
    const v = top.items[top.i++]
    const leaf = top.depth === shape.length - 1
    if (Array.isArray(v)) {
      if (leaf) throw invalid(`tensor data is nested deeper than its shape [${shape.join(',')}]`)
      stack.push({ items: v, depth: top.depth + 1, i: 0 })
    } else {
      if (!leaf)
        throw invalid(
          `tensor data is not rectangular: a value at depth ${top.depth} where shape [${shape.join(',')}] needs an ` +
            `array`,
        )
      out.push(v)
    }
  }
  return out
}

/** JSON values as the dtype's data: each checked against its type (tensor-values.ts); strings as they are. */
function fromValues<D extends DType>(dtype: D, values: unknown[]): TypedArrayOf<D> {
  if (dtype !== 'string') return valuesToTyped(dtype as RunnerDType, values, 'tensor') as TypedArrayOf<D>
  const i = values.findIndex((v) => typeof v !== 'string')
  if (i >= 0) throw invalid(`tensor data[${i}] is ${JSON.stringify(values[i])}, not a string`)
  return values as TypedArrayOf<D>
}

/** Raw little-endian bytes as the dtype's data (strings: each a 4-byte length and its UTF-8 bytes). */
function fromBytes<D extends DType>(dtype: D, shape: number[], bytes: Uint8Array): TypedArrayOf<D> {
  if (dtype === 'string') {
    const values = decodeStrings(bytes)
    if (values === undefined || values.length !== count(shape))
      throw invalid(
        `raw string tensor body must hold ${count(shape)} strings, each a 4-byte little-endian length and its bytes`,
      )
    return values as TypedArrayOf<D>
  }
  const Ctor = ARRAYS[dtype as RunnerDType]
  const expected = count(shape) * Ctor.BYTES_PER_ELEMENT
  if (bytes.byteLength !== expected)
    throw invalid(
      `raw tensor body has ${bytes.byteLength} bytes; shape [${shape.join(',')}] of ${dtype} needs ${expected}`,
    )
  // A view where the body's bytes are aligned for the dtype (the usual case: a fresh buffer);
  // a copy only where they are not.
  if (bytes.byteOffset % Ctor.BYTES_PER_ELEMENT === 0)
    return new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, count(shape)) as TypedArrayOf<D>
  const aligned = new Uint8Array(expected)
  aligned.set(bytes)
  return new Ctor(aligned.buffer) as TypedArrayOf<D>
}

/** Parses `1,3,48,192` (also `[1,3,48,192]`); an empty value (or `[]`) is a scalar's shape. */
export function parseShapeHeader(value: string | null): number[] {
  if (value === null)
    throw invalid(`a raw tensor body needs an ${SHAPE_HEADER} header, e.g. "1,3,48,192" (empty for a scalar)`)
  if (value.trim() === '' || value.trim() === '[]') return []
  const parts = value
    .replace(/^\[|\]$/g, '')
    .split(',')
    .map((s) => s.trim())
  if (parts.some((p) => !/^\d+$/.test(p)))
    throw invalid(`${SHAPE_HEADER} "${value}" must be comma-separated non-negative integers`)
  return parts.map(Number)
}

/**
 * A tensor body: JSON `{ "shape": [...], "dtype": "float32", "data": [...] }` (flat or nested),
 * or raw little-endian bytes (`application/octet-stream`) with `X-Tensor-Shape` and
 * `X-Tensor-Dtype` headers. Responses are JSON unless the client accepts octet-stream.
 *
 * @example
 * io.tensor({ dtype: 'float32', shape: [-1, 3, 48, 192] })
 */
export function tensor<D extends DType>(options: { dtype: D; shape?: number[] }): IODescriptor<Tensor<D>, Tensor<D>> {
  const { dtype, shape: declared } = options
  if (!DTYPES.includes(dtype))
    throw new BundleError('E_SERVICE_DEFINITION', `unknown tensor dtype "${dtype}"; use one of ${DTYPES.join(', ')}`)
  const decodeTensor = (bytes: Uint8Array, body: RequestBody): Tensor<D> => {
    if (baseMediaType(body.contentType) === 'application/octet-stream') {
      const shape = checkShape(parseShapeHeader(body.headers.get(SHAPE_HEADER)), declared)
      const given = body.headers.get(DTYPE_HEADER)
      if (given !== null && given.trim().toLowerCase() !== dtype)
        throw invalid(`${DTYPE_HEADER} is "${given}", this API takes ${dtype}`)
      return { dtype, shape, data: fromBytes(dtype, shape, bytes) }
    }
    // Exact 64-bit integers and NaN/Infinity tokens survive the parse (lenient-json.ts).
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
    const raw = parseTensorJson(text) as { shape?: unknown; dtype?: unknown; data?: unknown }
    if (raw === null || typeof raw !== 'object') throw invalid('tensor JSON must be an object { shape, dtype, data }')
    if (raw.dtype !== undefined && raw.dtype !== dtype)
      throw invalid(`tensor dtype is ${JSON.stringify(raw.dtype)}, this API takes ${dtype}`)
    const shape = checkShape(raw.shape, declared)
    // A scalar (shape []) may be its bare value.
    const data = shape.length === 0 && !Array.isArray(raw.data) && raw.data !== undefined ? [raw.data] : raw.data
    if (!Array.isArray(data)) throw invalid('tensor data must be an array (flat or nested, row-major)')
    const values = flatten(data, shape)
    if (values.length !== count(shape))
      throw invalid(`tensor data has ${values.length} values; shape [${shape.join(',')}] needs ${count(shape)}`)
    return { dtype, shape, data: fromValues(dtype, values) }
  }
  return {
    kind: 'tensor',
    mediaTypes: ['application/octet-stream', 'application/json'],
    decode(body) {
      return withBytes(body, (bytes) => decodeTensor(bytes, body))
    },
    encode(value, accept) {
      if (
        !value ||
        !Array.isArray(value.shape) ||
        !(ArrayBuffer.isView(value.data) || (dtype === 'string' && Array.isArray(value.data))) ||
        count(value.shape) !== (value.data as ArrayLike<unknown>).length
      ) {
        throw new BundleError(
          'E_OUTPUT_INVALID',
          'the API output is a tensor: return { dtype, shape, data } with data.length equal to the product of shape',
        )
      }
      if (accept?.split(',').some((a) => baseMediaType(a) === 'application/octet-stream')) {
        const v = value.data
        return {
          body: Array.isArray(v) ? encodeStrings(v) : new Uint8Array(v.buffer, v.byteOffset, v.byteLength),
          contentType: 'application/octet-stream',
          headers: { [SHAPE_HEADER]: value.shape.join(','), [DTYPE_HEADER]: value.dtype },
        }
      }
      // Exact 64-bit integers, NaN and ±Infinity as tokens, float16 as numbers (tensor-values.ts).
      const data = valuesToJson(value as { dtype: string; data: ArrayLike<unknown> })
      const body = `{"shape":[${value.shape.join(',')}],"dtype":${JSON.stringify(value.dtype)},"data":${data}}`
      return { body, contentType: 'application/json' }
    },
    openapi: () => ({
      'application/json': {
        schema: {
          type: 'object',
          required: ['shape', 'data'],
          properties: {
            shape: {
              type: 'array',
              items: { type: 'integer', minimum: 0 },
              ...(declared ? { minItems: declared.length, maxItems: declared.length } : {}),
            },
            dtype: { type: 'string', const: dtype },
            data: { type: 'array', description: 'row-major values, flat or nested' },
          },
        },
      },
      'application/octet-stream': {
        schema: {
          type: 'string',
          contentMediaType: 'application/octet-stream',
          description: `raw little-endian ${dtype}; send ${SHAPE_HEADER} (and optionally ${DTYPE_HEADER})`,
        },
      },
    }),
  }
}
