import { BundleError, isBundleError } from '../../errors/index.js'
import { readForm } from './form.js'
import { mediaTypeMatches, wholeBody, type IODescriptor, type InputOf, type OutputOf } from './types.js'

type Parts = Record<string, IODescriptor<any, any>>

export interface MultipartOptions {
  /** Most parts a body may hold, declared or not (default 32, or the number declared if more): 413 past it. */
  maxParts?: number
  /** Largest declared part in bytes (default: only the server's body limit): 413 past it. */
  maxPartBytes?: number
}

/**
 * Several named parts in one `multipart/form-data` body, each decoded by its own descriptor.
 * Parts not declared are ignored; a body with more than `maxParts` parts is refused before
 * it is parsed.
 *
 * @example
 * io.multipart({ image: io.image(), options: io.json(z.object({ lang: z.string() })) }, { maxPartBytes: 8 << 20 })
 */
export function multipart<P extends Parts>(
  parts: P,
  options: MultipartOptions = {},
): IODescriptor<{ [K in keyof P]: InputOf<P[K]> }, { [K in keyof P]: OutputOf<P[K]> }> {
  const maxParts = options.maxParts ?? Math.max(32, Object.keys(parts).length)
  const maxPartBytes = options.maxPartBytes ?? Infinity
  if (!Number.isSafeInteger(maxParts) || maxParts < Object.keys(parts).length)
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      `io.multipart: maxParts must be a whole number ≥ the ${Object.keys(parts).length} declared parts, got ` +
        `${maxParts}`,
    )
  if (!(maxPartBytes > 0))
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      `io.multipart: maxPartBytes must be a positive number, got ${maxPartBytes}`,
    )
  return {
    kind: 'multipart',
    mediaTypes: ['multipart/form-data'],
    async decode(body) {
      const form = await readForm(body, maxParts)
      const out: Record<string, unknown> = {}
      for (const [name, part] of Object.entries(parts)) {
        const value = form.get(name)
        if (value === null)
          throw new BundleError('E_INPUT_INVALID', `multipart part "${name}" is missing`, {
            details: { issues: [{ path: [name], message: 'required', code: 'missing_part' }] },
          })
        const isFile = typeof value !== 'string'
        const contentType = isFile
          ? (value as File).type || 'application/octet-stream'
          : part.mediaTypes[0] === 'application/json'
            ? 'application/json'
            : 'text/plain'
        if (!mediaTypeMatches(contentType, part.mediaTypes)) {
          throw new BundleError(
            'E_HTTP_UNSUPPORTED_MEDIA_TYPE',
            `multipart part "${name}" is ${contentType}; it accepts ${part.mediaTypes.join(', ')}`,
          )
        }
        const bytes = isFile
          ? new Uint8Array(await (value as File).arrayBuffer())
          : new TextEncoder().encode(value as string)
        if (bytes.byteLength > maxPartBytes)
          throw new BundleError(
            'E_INPUT_MULTIPART_LIMIT',
            `multipart part "${name}" is ${bytes.byteLength} bytes; this API accepts at most ${maxPartBytes}`,
          )
        try {
          out[name] = await part.decode({
            contentType,
            headers: new Headers({ 'content-type': contentType }),
            bytes: async () => bytes,
            formData: async () => new FormData(),
          })
        } catch (err) {
          if (isBundleError(err))
            throw new BundleError(err.code, `part "${name}": ${err.message}`, { details: err.details })
          throw err
        }
      }
      return out as { [K in keyof P]: InputOf<P[K]> }
    },
    async encode(value) {
      const form = new FormData()
      for (const [name, part] of Object.entries(parts)) {
        const enc = await part.encode((value as Record<string, unknown>)[name])
        const body = wholeBody(enc, `multipart part ${name}`)
        form.append(
          name,
          new Blob([typeof body === 'string' ? body : new Uint8Array(body)], { type: enc.contentType }),
          name,
        )
      }
      const res = new Response(form)
      return { body: new Uint8Array(await res.arrayBuffer()), contentType: res.headers.get('content-type')! }
    },
    openapi: () => ({
      'multipart/form-data': {
        schema: {
          type: 'object',
          required: Object.keys(parts),
          properties: Object.fromEntries(
            Object.entries(parts).map(([n, p]) => [n, Object.values(p.openapi())[0]?.schema ?? {}]),
          ),
        },
      },
    }),
  }
}
