import { promisify } from 'node:util'
import { deflate, gunzip, gzip, inflate } from 'node:zlib'
import { BundleError } from '../../errors/index.js'

// Compressed request bodies: every API's (the request pipeline) and /v2 inference's, as Triton's
// clients send and accept them when asked to
// (request_compression_algorithm / response_compression_algorithm: gzip or deflate, where
// deflate is the zlib format). Decompression is capped at the body limit: a small compressed
// body must not expand past what the server would accept uncompressed.

const unzip = { gzip: promisify(gunzip), deflate: promisify(inflate) }
const zip = { gzip: promisify(gzip), deflate: promisify(deflate) }

/** The request body as sent, decompressed per its Content-Encoding. */
export async function decodeBody(
  body: Uint8Array,
  contentEncoding: string | undefined,
  max: number,
): Promise<Uint8Array> {
  const enc = contentEncoding?.trim().toLowerCase()
  if (!enc || enc === 'identity') return body
  if (enc !== 'gzip' && enc !== 'deflate')
    throw new BundleError(
      'E_HTTP_UNSUPPORTED_MEDIA_TYPE',
      `Content-Encoding "${contentEncoding}" is not supported; send gzip, deflate or an uncompressed body`,
    )
  try {
    return new Uint8Array(await unzip[enc](body, { maxOutputLength: max }))
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
      throw new BundleError('E_HTTP_PAYLOAD_TOO_LARGE', `the ${enc} body expands past ${max} bytes`)
    throw new BundleError('E_INPUT_INVALID', `the body is not valid ${enc} data: ${(err as Error).message}`)
  }
}

/** The encoding a client asked for in Accept-Encoding that we speak (gzip before deflate), if any. */
export function pickEncoding(acceptEncoding: string | undefined): 'gzip' | 'deflate' | undefined {
  if (!acceptEncoding) return undefined
  const offered = new Map<string, number>()
  for (const part of acceptEncoding.toLowerCase().split(',')) {
    const [token, ...params] = part.trim().split(';')
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    offered.set(token!.trim(), q === undefined ? 1 : Number(q.slice(2)) || 0)
  }
  for (const enc of ['gzip', 'deflate'] as const) if ((offered.get(enc) ?? 0) > 0) return enc
  return undefined
}

export async function encodeBody(body: Uint8Array | string, enc: 'gzip' | 'deflate'): Promise<Uint8Array> {
  return new Uint8Array(await zip[enc](typeof body === 'string' ? Buffer.from(body) : body))
}
