import { BundleError } from '../../errors/index.js'

export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

const tooLarge = (max: number) => new BundleError('E_HTTP_PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`)

/**
 * Reads a request body, refusing past `max` bytes: at once when Content-Length says so,
 * otherwise as soon as the streamed (chunked) body crosses the limit.
 */
export async function readBody(req: Request, max: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length'))
  if (Number.isFinite(declared) && declared > max) throw tooLarge(max)
  if (req.body === null) return new Uint8Array(0)
  const reader = req.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel().catch(() => undefined)
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
