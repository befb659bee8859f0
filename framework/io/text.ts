import { BundleError } from '../../errors/index.js'
import { withBytes, type IODescriptor } from './types.js'

/** A UTF-8 text body (`text/plain`). */
export function text(): IODescriptor<string, string> {
  return {
    kind: 'text',
    mediaTypes: ['text/plain'],
    decode(body) {
      return withBytes(body, (bytes) => {
        try {
          return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
        } catch {
          throw new BundleError('E_INPUT_INVALID', 'request body is not valid UTF-8 text')
        }
      })
    },
    encode(value) {
      if (typeof value !== 'string')
        throw new BundleError('E_OUTPUT_INVALID', `the API returned ${typeof value}, its output is text`)
      return { body: value, contentType: 'text/plain; charset=utf-8' }
    },
    openapi: () => ({ 'text/plain': { schema: { type: 'string' } } }),
  }
}
