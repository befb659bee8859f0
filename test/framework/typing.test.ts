// Compile-time contract: `npm test` type-checks this file, and every @ts-expect-error below must
// meet a real error — if a mismatched signature ever compiled, the type-check would fail.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { z } from 'zod'
import { api, defineApi, defineService, definitionOf, io, service } from '../../framework/index.js'

const In = z.object({ name: z.string() })
const Out = z.object({ greeting: z.string() })

@service({ name: 'typing' })
class Typing {
  @api({ input: io.json(In), output: io.json(Out) })
  async ok({ name }: { name: string }) {
    return { greeting: name }
  }

  // @ts-expect-error the method wants a number where the schema yields a string
  @api({ input: io.json(In), output: io.json(Out) })
  async wrongInput({ name }: { name: number }) {
    return { greeting: String(name) }
  }

  // @ts-expect-error the method returns a number where the schema wants a string
  @api({ input: io.json(In), output: io.json(Out) })
  async wrongOutput({ name }: { name: string }) {
    return { greeting: name.length }
  }

  // @ts-expect-error text() yields a string, not an image
  @api({ input: io.text(), output: io.text() })
  async wrongKind(img: { width: number }) {
    return String(img.width)
  }
}

describe('API signatures are checked against their schemas', () => {
  it('the well-typed API is registered (the mismatched ones are compile errors above)', () => {
    const def = definitionOf(Typing)!
    assert.deepEqual(
      def.apis.map((a) => a.route),
      ['/ok', '/wrongInput', '/wrongOutput', '/wrongKind'],
    )
  })

  it('defineApi checks handlers the same way', () => {
    const def = defineService({
      name: 'typing-2',
      apis: {
        good: defineApi({
          input: io.json(In),
          output: io.json(Out),
          handler: async ({ name }) => ({ greeting: name }),
        }),
        // @ts-expect-error handler returns the wrong shape
        bad: defineApi({ input: io.json(In), output: io.json(Out), handler: async ({ name }) => ({ nope: name }) }),
      },
    })
    assert.equal(def.apis.length, 2)
  })
})
