import { z } from 'zod'
import { BundleError } from '../../errors/index.js'
import { withBytes, type IODescriptor, type JsonSchema } from './types.js'

export type Issue = { path: (string | number)[]; message: string; code: string }

/** zod issues as a client can read them: where, what, and zod's code. */
export function issuesOf(error: z.ZodError): Issue[] {
  return error.issues.map((i) => ({
    path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)),
    message: i.message,
    code: i.code,
  }))
}

export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // OpenAPI 3.1 uses JSON Schema 2020-12; types JSON cannot express become {} instead of failing.
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as JsonSchema
  return rest
}

export function parseJsonBody(bytes: Uint8Array): unknown {
  // A Buffer (what the server reads) decodes in place; other views are wrapped first.
  const text =
    bytes instanceof Buffer
      ? bytes.toString()
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new BundleError('E_INPUT_INVALID', `request body is not valid JSON: ${(err as Error).message}`)
  }
}

/**
 * A JSON body validated by a zod schema.
 *
 * @example
 * io.json(z.object({ name: z.string().min(1) }))
 */
export function json<S extends z.ZodType>(schema: S): IODescriptor<z.output<S>, z.input<S>> {
  return {
    kind: 'json',
    mediaTypes: ['application/json'],
    decode(body) {
      return withBytes(body, (bytes) => {
        const parsed = schema.safeParse(parseJsonBody(bytes))
        if (!parsed.success)
          throw new BundleError(
            'E_INPUT_INVALID',
            `input does not match the schema: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
            { details: { issues: issuesOf(parsed.error) } },
          )
        return parsed.data
      })
    },
    encode(value) {
      const parsed = schema.safeParse(value)
      if (!parsed.success)
        throw new BundleError('E_OUTPUT_INVALID', 'the API returned a value that does not match its output schema', {
          details: { issues: issuesOf(parsed.error) },
        })
      return { body: JSON.stringify(parsed.data), contentType: 'application/json' }
    },
    openapi: () => ({ 'application/json': { schema: jsonSchemaOf(schema, 'input') } }),
  }
}
