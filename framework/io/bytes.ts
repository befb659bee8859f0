import { BundleError } from '../../errors/index.js'
import { withBytes, type IODescriptor } from './types.js'

/**
 * Raw bytes (`application/octet-stream`) as a Uint8Array. As the item of an io.stream input it
 * takes a WebSocket's binary messages (audio chunks, frames).
 *
 * @example
 * @api({ input: io.stream(io.bytes()), output: io.stream(io.json(Event)) })
 * async *listen(chunks: AsyncIterable<Uint8Array>) { for await (const c of chunks) yield { bytes: c.byteLength } }
 */
export function bytes(): IODescriptor<Uint8Array, Uint8Array> {
  return {
    kind: 'bytes',
    mediaTypes: ['application/octet-stream'],
    decode: (body) => withBytes(body, (b) => b),
    encode(value) {
      if (!(value instanceof Uint8Array))
        throw new BundleError(
          'E_OUTPUT_INVALID',
          `the API returned ${typeof value}; its output is bytes (a Uint8Array)`,
        )
      return { body: value, contentType: 'application/octet-stream' }
    },
    openapi: () => ({
      'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
    }),
  }
}
