import { BundleError } from '../../errors/index.js'
/** Read access to request headers (names are case-insensitive). */
export interface HeaderReader {
  get(name: string): string | null
}

/** The request body as an API's input descriptor sees it. */
export interface RequestBody {
  contentType: string
  headers: HeaderReader
  bytes(): Promise<Uint8Array>
  /**
   * The same bytes when they are already in memory (always, on the server): a descriptor can
   * then decode without a promise hop, which is most of what a small JSON call costs.
   */
  readonly raw?: Uint8Array
  /** Parsed multipart form; only called for multipart/form-data. */
  formData(): Promise<FormData>
}

/**
 * A streamed answer as the server writes it (io.stream): the chunks of text to send as they
 * come, and how to end the stream when the API fails part way (the status line is long gone).
 */
export interface StreamBody {
  readonly chunks: AsyncIterable<string>
  /** The last chunk after a failure mid-stream: an `error` event, or an `{"error": …}` line. */
  failure(error: { code: string; message: string; details?: unknown }): string
}

export const isStreamBody = (body: unknown): body is StreamBody =>
  typeof body === 'object' && body !== null && 'chunks' in body && 'failure' in body

/** An encoded body that must be whole (a multipart part, a task's result): never a stream. */
export function wholeBody(encoded: EncodedBody, where: string): Uint8Array | string {
  if (isStreamBody(encoded.body))
    throw new BundleError('E_SERVICE_DEFINITION', `${where} cannot be a stream (io.stream answers only plain APIs)`)
  return encoded.body
}

export interface EncodedBody {
  /** The whole answer, or (io.stream) its chunks as they come. */
  body: Uint8Array | string | StreamBody
  contentType: string
  headers?: Record<string, string>
}

export type JsonSchema = Record<string, unknown>

/**
 * How one API input or output travels over HTTP. `In` is what the method receives after
 * decoding and validation; `Out` is what the method returns for encoding.
 */
export interface IODescriptor<In = unknown, Out = In> {
  readonly kind: string
  /** Accepted request media types (patterns like `image/*` allowed); the first is the response type. */
  readonly mediaTypes: readonly string[]
  decode(body: RequestBody): In | Promise<In>
  encode(value: Out, accept?: string): EncodedBody | Promise<EncodedBody>
  /** OpenAPI 3.1 request/response content, keyed by media type. */
  openapi(): Record<string, { schema: JsonSchema; itemSchema?: JsonSchema }>
  /** Phantom fields that carry the static types; never set at run time. */
  readonly __in?: In
  readonly __out?: Out
}

export type InputOf<D> = D extends IODescriptor<infer I, unknown> ? I : never
export type OutputOf<D> = D extends IODescriptor<unknown, infer O> ? O : never

/** Runs `f` on the body's bytes: at once when they are in memory, else once read. */
export function withBytes<T>(body: RequestBody, f: (bytes: Uint8Array) => T): T | Promise<T> {
  return body.raw !== undefined ? f(body.raw) : body.bytes().then(f)
}

/** `type/subtype` without parameters, lower case. */
export function baseMediaType(contentType: string | null | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase()
}

export function mediaTypeMatches(contentType: string, patterns: readonly string[]): boolean {
  // The usual case, a bare media type exactly as declared, without splitting and lower-casing.
  if (patterns.includes(contentType)) return true
  const base = baseMediaType(contentType)
  return patterns.some(
    (p) =>
      p === '*/*' ||
      p === base ||
      (p.endsWith('/*') && base.startsWith(p.slice(0, -1))) ||
      (p === 'application/json' && base.endsWith('+json')),
  )
}
