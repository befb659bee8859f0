import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { z } from 'zod'
import { Greeter } from '../../examples/greeter/service.js'
import { defineApi, defineService, definitionOf, io, openapiDocument } from '../../framework/index.js'

async function validate(doc: Record<string, unknown>): Promise<void> {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(doc))
  assert.equal(validator.version, '3.1')
  assert.ok(result.valid, JSON.stringify(result.errors, null, 2))
}

describe('OpenAPI document', () => {
  it('the greeter document validates as OpenAPI 3.1 and lists every API', async () => {
    const doc = openapiDocument(definitionOf(Greeter)!)
    await validate(doc)
    const paths = doc.paths as Record<string, { post?: { operationId: string } }>
    assert.deepEqual(
      Object.values(paths).flatMap((p) => (p.post ? [p.post.operationId] : [])),
      ['greet', 'shout'],
    )
  })

  it('every IO type produces a valid document with its schemas', async () => {
    const def = defineService({
      name: 'all-io',
      apis: {
        j: defineApi({
          input: io.json(
            z.object({ a: z.array(z.number()).min(1), b: z.enum(['x', 'y']).optional(), c: z.string().default('z') }),
          ),
          output: io.json(z.union([z.string(), z.number()])),
          handler: async () => 'x',
        }),
        t: defineApi({ input: io.text(), output: io.text(), handler: async (s) => s }),
        i: defineApi({ input: io.image(), output: io.image(), handler: async (x) => x }),
        f: defineApi({
          input: io.file({ mediaTypes: ['application/pdf'] }),
          output: io.file(),
          handler: async (x) => x,
        }),
        n: defineApi({
          input: io.tensor({ dtype: 'int64', shape: [-1, 4] }),
          output: io.tensor({ dtype: 'float32' }),
          handler: async (x) => ({ dtype: 'float32' as const, shape: x.shape, data: new Float32Array(x.data.length) }),
        }),
        m: defineApi({
          input: io.multipart({ img: io.image(), meta: io.json(z.object({ k: z.string() })) }),
          output: io.json(z.object({})),
          handler: async () => ({}),
        }),
      },
    })
    const doc = openapiDocument(def)
    await validate(doc)
    const body = (route: string) =>
      (
        doc.paths as Record<
          string,
          { post: { requestBody: { content: Record<string, { schema: Record<string, unknown> }> } } }
        >
      )[route]!.post.requestBody.content
    assert.deepEqual(Object.keys(body('/i')), ['image/png', 'image/jpeg', 'image/webp', 'multipart/form-data'])
    assert.deepEqual(Object.keys(body('/n')), ['application/json', 'application/octet-stream'])
    assert.deepEqual(Object.keys(body('/m')), ['multipart/form-data'])
    assert.deepEqual((body('/j')['application/json']!.schema as { required: string[] }).required, ['a'])
  })
})
