import { BundleError, ignore } from '../../errors/index.js'

export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

const tooLarge = (max: number) =>
  new BundleError('E_HTTP_PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`)

/**
 * Reads a request body, refusing past `max` bytes: at once when Content-Length says so,
 * otherwise as soon as the streamed (chunked) body crosses the limit. With a Content-Length
 * the body is read through `whole()` (hono's fast path on node, which never builds a web
 * ReadableStream); a chunked body is read chunk by chunk so it can be cut off early.
 */
export async function readBody(
  contentLength: string | undefined,
  whole: () => Promise<ArrayBuffer>,
  stream: () => ReadableStream<Uint8Array> | null,
  max: number,
): Promise<Uint8Array> {
  if (contentLength !== undefined && /^\d+$/.test(contentLength)) {
    if (Number(contentLength) > max) throw tooLarge(max)
    const buf = new Uint8Array(await whole())
    if (buf.byteLength > max) throw tooLarge(max)
    return buf
  }
  const body = stream()
  if (body === null) return new Uint8Array(0)
  const req = { body }
  const reader = req.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel().catch(ignore('the body is refused already; cancelling only frees its stream'))
      throw tooLarge(max)
    }
    chunks.push(value)
  }
  if (chunks.length === 1) return chunks[0]!
  const out = new Uint8Array(size)
  let off = 0
  for (const c of chunks) {
    out.set(c, off)
    off += c.byteLength
  }
  return out
}
