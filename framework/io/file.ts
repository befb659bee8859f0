import { BundleError } from '../../errors/index.js'
import { baseMediaType, type IODescriptor } from './types.js'

/** Raw bytes with their media type, as `io.file()` delivers and accepts them. */
export interface FileValue {
  bytes: Uint8Array
  mediaType: string
  filename?: string
}

/**
 * Any body as bytes. `mediaTypes` restricts what is accepted (default: anything).
 *
 * @example
 * io.file({ mediaTypes: ['application/pdf'] })
 */
export function file(options: { mediaTypes?: string[] } = {}): IODescriptor<FileValue, FileValue> {
  const mediaTypes = options.mediaTypes ?? ['*/*']
  return {
    kind: 'file',
    mediaTypes,
    async decode(body) {
      return { bytes: await body.bytes(), mediaType: baseMediaType(body.contentType) || 'application/octet-stream' }
    },
    encode(value) {
      if (!value || !(value.bytes instanceof Uint8Array))
        throw new BundleError('E_OUTPUT_INVALID', 'the API output is a file: return { bytes: Uint8Array, mediaType }')
      // ASCII fallback plus RFC 5987 filename* for the real (UTF-8) name: header values are bytes.
      const headers: Record<string, string> = value.filename
        ? {
            'content-disposition':
              `attachment; filename="${value.filename.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; ` +
              `filename*=UTF-8''${encodeURIComponent(value.filename)}`,
          }
        : {}
      return { body: value.bytes, contentType: value.mediaType || 'application/octet-stream', headers }
    },
    openapi: () =>
      Object.fromEntries(
        mediaTypes.map((m) => [
          m,
          { schema: { type: 'string', contentMediaType: m === '*/*' ? 'application/octet-stream' : m } },
        ]),
      ),
  }
}
