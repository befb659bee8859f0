import { BundleError } from '../../errors/index.js'
import { parseTensorJson } from '../io/lenient-json.js'
import { DTYPE_HEADER, DTYPES, SHAPE_HEADER, tensor, type DType } from '../io/tensor.js'
import { valuesToJson } from '../io/tensor-values.js'
import { baseMediaType } from '../io/types.js'

// How the client turns a call's input into a request body and an answer into a value: the
// runtime side of wire-types.ts, which says the same thing to the compiler.

/** One API as the client knows it from the server's /openapi.json. */
export interface Operation {
  route: string
  requestTypes: string[]
  /** Answers with a stream of items (io.stream): asked for as Server-Sent Events. */
  streams: boolean
  /** Takes a tensor (io.tensor): typed arrays go as raw bytes. */
  tensorIn: boolean
  /** The media type of each binary part of a multipart input. */
  partTypes: Record<string, string>
  /** The tensor parts of a multipart input and their dtypes. */
  tensorPartsIn: Record<string, DType>
  /** Answers with a tensor of this dtype (io.tensor): asked for as raw bytes, read into a typed array. */
  tensorOut?: DType
  /** The tensor parts of a multipart answer and their dtypes. */
  tensorParts: Record<string, DType>
}

type Schema = { properties?: Record<string, Schema>; const?: unknown; contentMediaType?: string }
type Content = Record<string, { schema?: Schema }> | undefined
/** The part of an OpenAPI operation the client reads. */
export interface OpenApiPost {
  operationId?: string
  requestBody?: { content?: Content }
  responses?: Record<string, { content?: Content }>
}

/** The dtype of io.tensor's JSON schema (its `dtype` property is a const), else undefined. */
function tensorDtypeOf(schema: Schema | undefined): DType | undefined {
  const d = schema?.properties?.dtype?.const
  return typeof d === 'string' && (DTYPES as string[]).includes(d) && schema?.properties?.shape
    ? (d as DType)
    : undefined
}

export function operationOf(route: string, post: OpenApiPost): Operation {
  const request = post.requestBody?.content ?? {}
  const answer = post.responses?.['200']?.content ?? {}
  const parts = (content: Content) => Object.entries(content?.['multipart/form-data']?.schema?.properties ?? {})
  const tensorPartsOf = (content: Content) =>
    Object.fromEntries(parts(content).flatMap(([n, s]) => (tensorDtypeOf(s) ? [[n, tensorDtypeOf(s)!]] : [])))
  const tensorOut = answer['application/octet-stream'] ? tensorDtypeOf(answer['application/json']?.schema) : undefined
  return {
    route,
    requestTypes: Object.keys(request),
    streams: Object.hasOwn(answer, 'text/event-stream'),
    tensorIn: request['application/octet-stream'] !== undefined && !!tensorDtypeOf(request['application/json']?.schema),
    partTypes: Object.fromEntries(
      parts(request).flatMap(([n, s]) => (s.contentMediaType ? [[n, s.contentMediaType] as const] : [])),
    ),
    tensorPartsIn: tensorPartsOf(request),
    ...(tensorOut ? { tensorOut } : {}),
    tensorParts: tensorPartsOf(answer),
  }
}

type Bytes = Uint8Array<ArrayBuffer>
interface BinaryValue {
  body: Bytes | Blob
  mediaType: string | undefined
  filename?: string | undefined
}

/** A binary input — a Uint8Array (Buffer), a Blob or File, or `{ bytes, mediaType?, filename? }` — else undefined. */
function binaryOf(value: unknown): BinaryValue | undefined {
  if (value instanceof Uint8Array) return { body: value as Bytes, mediaType: undefined }
  if (value instanceof Blob)
    return { body: value, mediaType: value.type || undefined, filename: (value as { name?: string }).name }
  const file = value as { bytes?: unknown; mediaType?: string; filename?: string } | null
  if (file !== null && typeof file === 'object' && file.bytes instanceof Uint8Array)
    return { body: file.bytes as Bytes, mediaType: file.mediaType || undefined, filename: file.filename }
  return undefined
}

type TensorLike = { dtype?: string; shape: readonly number[]; data: unknown }
const isTensorLike = (v: unknown): v is TensorLike =>
  v !== null && typeof v === 'object' && Array.isArray((v as TensorLike).shape) && 'data' in v

/** A tensor with typed-array data as JSON text that loses nothing (64-bit integers exact, NaN, -0). */
function tensorJson(t: TensorLike & { data: ArrayBufferView }, dtype: string): string {
  const data = valuesToJson({ dtype, data: t.data as unknown as ArrayLike<unknown> })
  return `{"shape":${JSON.stringify(t.shape)},"dtype":${JSON.stringify(dtype)},"data":${data}}`
}

export interface EncodedInput {
  body: string | Bytes | Blob | FormData
  /** Lower-case names; no content-type for a form (fetch writes it with the boundary). */
  headers: Record<string, string>
}

/**
 * The request for `input`: binary inputs as raw bytes, tensors with typed-array data as raw
 * bytes with X-Tensor-Shape, JSON and text as such, an object for a multipart API as a form.
 */
export function encodeInput(name: string, op: Operation, input: unknown): EncodedInput {
  const accepts = (t: string) => op.requestTypes.includes(t)
  const binary = binaryOf(input)
  if (binary) {
    const declared = op.requestTypes.find((t) => !t.includes('*') && t !== 'multipart/form-data')
    return {
      body: binary.body,
      headers: { 'content-type': binary.mediaType ?? declared ?? 'application/octet-stream' },
    }
  }
  if (op.tensorIn && isTensorLike(input) && ArrayBuffer.isView(input.data)) {
    const d = input.data
    return {
      body: new Uint8Array(d.buffer as ArrayBuffer, d.byteOffset, d.byteLength),
      headers: {
        'content-type': 'application/octet-stream',
        [SHAPE_HEADER]: input.shape.join(','),
        ...(input.dtype ? { [DTYPE_HEADER]: input.dtype } : {}),
      },
    }
  }
  if (accepts('application/json')) {
    const tensorLike =
      input !== null && typeof input === 'object' && ArrayBuffer.isView((input as { data?: unknown }).data)
    const body = JSON.stringify(
      tensorLike
        ? { ...(input as object), data: Array.from((input as { data: ArrayLike<number | bigint> }).data, Number) }
        : input,
    )
    return { body, headers: { 'content-type': 'application/json' } }
  }
  if (accepts('text/plain')) return { body: String(input), headers: { 'content-type': 'text/plain; charset=utf-8' } }
  if (accepts('multipart/form-data') && input !== null && typeof input === 'object' && !Array.isArray(input))
    return { body: formOf(op, input as Record<string, unknown>), headers: {} }
  throw new BundleError(
    'E_INPUT_INVALID',
    `${name} takes ${op.requestTypes.join(', ')}; pass { bytes, mediaType }, a Uint8Array or a Blob for binary inputs`,
  )
}

/**
 * A multipart input: binary parts as files, strings as text fields, tensors and other values as
 * JSON files (a tensor part reads JSON; a text field would be text/plain to it).
 */
function formOf(op: Operation, input: Record<string, unknown>): FormData {
  const form = new FormData()
  for (const [part, value] of Object.entries(input)) {
    if (value === undefined) continue
    const binary = binaryOf(value)
    if (binary) {
      const type = binary.mediaType ?? op.partTypes[part] ?? 'application/octet-stream'
      const blob =
        binary.body instanceof Blob && binary.body.type === type ? binary.body : new Blob([binary.body], { type })
      form.append(part, blob, binary.filename ?? part)
    } else if (typeof value === 'string') {
      form.append(part, value)
    } else {
      const dtype = (isTensorLike(value) && value.dtype) || op.tensorPartsIn[part]
      const text =
        isTensorLike(value) && ArrayBuffer.isView(value.data) && dtype
          ? tensorJson(value as TensorLike & { data: ArrayBufferView }, dtype)
          : JSON.stringify(value)
      form.append(part, new Blob([text], { type: 'application/json' }), part)
    }
  }
  return form
}

/** A tensor answer, raw (X-Tensor-Shape, X-Tensor-Dtype) or JSON, with typed-array data. */
function tensorOf(dtype: DType, contentType: string, headers: Headers, bytes: Uint8Array): unknown {
  const sent = headers.get(DTYPE_HEADER)?.trim().toLowerCase()
  const d = sent !== undefined && (DTYPES as string[]).includes(sent) ? (sent as DType) : dtype
  return tensor({ dtype: d }).decode({
    contentType,
    headers,
    raw: bytes,
    bytes: async () => bytes,
    formData: async () => new FormData(),
  })
}

/** `filename*=UTF-8''…` (the real name) or else `filename="…"` of a Content-Disposition header. */
function filenameOf(disposition: string | null): string | undefined {
  if (disposition === null) return undefined
  const star = /filename\*\s*=\s*UTF-8''([^;\s]+)/i.exec(disposition)
  if (star) {
    try {
      return decodeURIComponent(star[1]!)
    } catch {
      // A malformed escape: fall back to the plain name.
    }
  }
  return /filename\s*=\s*"([^"]*)"/i.exec(disposition)?.[1]
}

/** A whole (not streamed) 2xx answer as the value a call resolves to. */
export async function decodeAnswer(res: Response, op: Operation): Promise<unknown> {
  const type = res.headers.get('content-type') ?? ''
  const base = baseMediaType(type)
  if (op.tensorOut) return tensorOf(op.tensorOut, type, res.headers, new Uint8Array(await res.arrayBuffer()))
  // Tensor answers may hold NaN/Infinity tokens and integers past 2^53 (exact as BigInts).
  if (type.includes('json')) return parseTensorJson(await res.text())
  if (base.startsWith('text/')) return res.text()
  if (base === 'multipart/form-data') {
    const out: Record<string, unknown> = {}
    for (const [part, value] of await res.formData()) {
      if (typeof value === 'string') out[part] = value
      else {
        const bytes = new Uint8Array(await value.arrayBuffer())
        const partType = value.type
        const dtype = op.tensorParts[part]
        if (dtype) out[part] = await tensorOf(dtype, partType, new Headers(), bytes)
        else if (partType.includes('json')) out[part] = parseTensorJson(Buffer.from(bytes).toString('utf8'))
        else if (baseMediaType(partType).startsWith('text/')) out[part] = Buffer.from(bytes).toString('utf8')
        else out[part] = { bytes, mediaType: partType }
      }
    }
    return out
  }
  const filename = filenameOf(res.headers.get('content-disposition'))
  return { bytes: new Uint8Array(await res.arrayBuffer()), mediaType: type, ...(filename ? { filename } : {}) }
}
