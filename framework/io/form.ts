import { BundleError } from '../../errors/index.js'
import type { RequestBody } from './types.js'

/**
 * How many parts a multipart/form-data body holds, counted on its bytes before anything is
 * parsed: each delimiter line `--boundary` at the start of the body or after a CRLF, less the
 * closing one. A body within the size limit can still hold hundreds of thousands of tiny parts,
 * and parsing it into as many objects costs memory and time out of proportion to its size.
 */
export function countParts(bytes: Uint8Array, contentType: string): number {
  const m = /;\s*boundary=(?:"([^"]{1,200})"|([^;\s]{1,200}))/i.exec(contentType)
  if (m === null) return 0
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const delimiter = Buffer.from(`\r\n--${m[1] ?? m[2]}`)
  let n = buf.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2)) ? 1 : 0
  for (let at = buf.indexOf(delimiter); at !== -1; at = buf.indexOf(delimiter, at + delimiter.length)) n++
  return Math.max(0, n - 1)
}

/** The parsed form of a multipart body with at most `maxParts` parts (413 E_INPUT_MULTIPART_LIMIT past it; 400 if malformed). */
export async function readForm(body: RequestBody, maxParts: number): Promise<FormData> {
  const parts = countParts(await body.bytes(), body.contentType)
  if (parts > maxParts) throw new BundleError('E_INPUT_MULTIPART_LIMIT', `the multipart body has ${parts} parts; this API accepts at most ${maxParts}`)
  try {
    return await body.formData()
  } catch (err) {
    throw new BundleError('E_INPUT_INVALID', `request body is not valid multipart/form-data: ${(err as Error).message}`)
  }
}
