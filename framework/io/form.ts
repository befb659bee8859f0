import { BundleError } from '../../errors/index.js'
import type { RequestBody } from './types.js'

/**
 * How many parts a multipart/form-data body holds, counted on its bytes before anything is
 * parsed: each delimiter line `--boundary` at the start of the body or after a CRLF, less the
 * closing one. A body within the size limit can still hold hundreds of thousands of tiny parts,
 * and parsing it into as many objects costs memory and time out of proportion to its size.
 */
export function countParts(bytes: Uint8Array, contentType: string): number {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const delimiter = Buffer.from(`\r\n--${boundaryOf(contentType)}`)
  let n = buf.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2)) ? 1 : 0
  for (let at = buf.indexOf(delimiter); at !== -1; at = buf.indexOf(delimiter, at + delimiter.length)) n++
  return Math.max(0, n - 1)
}

/**
 * The boundary parameter, which must be there once and be 1–70 characters (RFC 2046). A body
 * whose boundary the counter could not read would count as zero parts while the parser, reading
 * it its own way, still found them all — so anything else is refused before parsing.
 */
function boundaryOf(contentType: string): string {
  const found = [...contentType.matchAll(/;\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s"]*))/gi)]
  const value = found.length === 1 ? (found[0]![1] ?? found[0]![2] ?? '') : ''
  if (found.length !== 1 || value.length < 1 || value.length > 70) {
    throw new BundleError(
      'E_INPUT_INVALID',
      `a multipart/form-data body needs one boundary parameter of 1 to 70 characters in its Content-Type; got ` +
        `${found.length === 0 ? 'none' : found.length > 1 ? `${found.length}` : `one of ${value.length}`}`,
    )
  }
  return value
}

/**
 * The parsed form of a multipart body with at most `maxParts` parts (413 E_INPUT_MULTIPART_LIMIT past it; 400 if
 * malformed).
 */
export async function readForm(body: RequestBody, maxParts: number): Promise<FormData> {
  const parts = countParts(await body.bytes(), body.contentType)
  if (parts > maxParts)
    throw new BundleError(
      'E_INPUT_MULTIPART_LIMIT',
      `the multipart body has ${parts} parts; this API accepts at most ${maxParts}`,
    )
  let form: FormData
  try {
    form = await body.formData()
  } catch (err) {
    throw new BundleError('E_INPUT_INVALID', `request body is not valid multipart/form-data: ${(err as Error).message}`)
  }
  // Belt and braces: whatever the parser made of the body, no more parts than allowed go on.
  let parsed = 0
  for (const _ of form.keys()) parsed++
  if (parsed > maxParts)
    throw new BundleError(
      'E_INPUT_MULTIPART_LIMIT',
      `the multipart body has ${parsed} parts; this API accepts at most ${maxParts}`,
    )
  return form
}
