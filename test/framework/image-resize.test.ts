import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import pino from 'pino'
import sharp from 'sharp'
import { z } from 'zod'
import { isBundleError } from '../../errors/index.js'
import { createServiceApp, defineApi, defineService, io } from '../../framework/index.js'

// A text line 320 × 48, as the quickstart's classifier gets it.
const LINE = readFileSync(new URL('../fixtures/images/hello-180.png', import.meta.url))
const Size = z.object({ width: z.number(), height: z.number(), bytes: z.number() })

async function app() {
  const size = (img: { width: number; height: number; data: Uint8Array }) => ({
    width: img.width,
    height: img.height,
    bytes: img.data.length,
  })
  const def = defineService({
    name: 'resize',
    apis: {
      exact: defineApi({
        input: io.image({ resize: { width: 10, height: 7 } }),
        output: io.json(Size),
        handler: async (i) => size(i),
      }),
      inside: defineApi({
        input: io.image({ resize: { width: 64, height: 64, fit: 'inside' } }),
        output: io.json(Size),
        handler: async (i) => size(i),
      }),
      line: defineApi({
        input: io.image({ resize: { height: 24, maxWidth: 100 } }),
        output: io.json(Size),
        handler: async (i) => size(i),
      }),
      wide: defineApi({
        input: io.image({ resize: { height: 24, maxWidth: 40 } }),
        output: io.json(Size),
        handler: async (i) => size(i),
      }),
      column: defineApi({
        input: io.image({ resize: { width: 16 } }),
        output: io.json(Size),
        handler: async (i) => size(i),
      }),
      pixels: defineApi({
        input: io.image({ resize: { width: 2, height: 1 } }),
        output: io.json(z.object({ data: z.array(z.number()) })),
        handler: async (i) => ({ data: [...i.data] }),
      }),
    },
  })
  const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
  await svc.start()
  return svc.app
}

const post = async (a: Awaited<ReturnType<typeof app>>, route: string, body: Uint8Array, type = 'image/png') => {
  const r = await a.request(route, {
    method: 'POST',
    headers: { 'content-type': type },
    body: body as Uint8Array<ArrayBuffer>,
  })
  return { status: r.status, body: (await r.json()) as Record<string, unknown> }
}

describe('io.image({ resize }): resized in the decoding pass', () => {
  it(
    'gives the handler pixels of the asked size: exact, ' + 'inside, by height with the width clamped, by width',
    async () => {
      const a = await app()
      const png = new Uint8Array(LINE)
      assert.deepEqual((await post(a, '/exact', png)).body, { width: 10, height: 7, bytes: 10 * 7 * 3 })
      // 320 × 48 inside 64 × 64 keeps its aspect: 64 × 10 (9.6 rounded).
      const inside = (await post(a, '/inside', png)).body
      assert.equal(inside.width, 64)
      assert.ok((inside.height as number) >= 9 && (inside.height as number) <= 10, `inside: ${JSON.stringify(inside)}`)
      // By height 24: 160 wide, clamped to 100 (squeezed), or to 40.
      assert.deepEqual((await post(a, '/line', png)).body, { width: 100, height: 24, bytes: 100 * 24 * 3 })
      assert.deepEqual((await post(a, '/wide', png)).body, { width: 40, height: 24, bytes: 40 * 24 * 3 })
      // A narrow image keeps its aspect under the clamp: 60 × 48 → 30 × 24.
      const narrow = new Uint8Array(
        await sharp({ create: { width: 60, height: 48, channels: 3, background: '#808080' } })
          .png()
          .toBuffer(),
      )
      assert.deepEqual((await post(a, '/line', narrow)).body, { width: 30, height: 24, bytes: 30 * 24 * 3 })
      // By width alone: 320 × 48 → 16 × 2 (2.4 rounded).
      assert.deepEqual((await post(a, '/column', png)).body, { width: 16, height: 2, bytes: 16 * 2 * 3 })
    },
  )

  it(
    'decodes JPEG and WebP the same way, flattens alpha ' + 'on white, and refuses what is not an image with 400',
    async () => {
      const a = await app()
      for (const f of ['jpeg', 'webp'] as const) {
        const img = new Uint8Array(
          await sharp({ create: { width: 8, height: 4, channels: 3, background: { r: 0, g: 0, b: 255 } } })
            [f]()
            .toBuffer(),
        )
        const r = await post(a, '/pixels', img, `image/${f}`)
        assert.equal(r.status, 200, f)
        const d = r.body.data as number[]
        assert.ok(d[2]! > 230 && d[0]! < 25, `${f} stays blue: ${d}`)
      }
      const clear = new Uint8Array(
        await sharp({ create: { width: 4, height: 4, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
          .png()
          .toBuffer(),
      )
      assert.deepEqual((await post(a, '/pixels', clear)).body, { data: [255, 255, 255, 255, 255, 255] })
      const gif = new Uint8Array(
        await sharp({ create: { width: 4, height: 4, channels: 3, background: '#000' } })
          .gif()
          .toBuffer(),
      )
      const refused = await post(a, '/exact', gif, 'image/png')
      assert.equal(refused.status, 400)
      assert.match(JSON.stringify(refused.body), /not a PNG, JPEG or WebP image \(it is gif\)/)
      const truncated = await post(a, '/line', new Uint8Array(LINE.subarray(0, 60)))
      assert.equal(truncated.status, 400)
      assert.match(JSON.stringify(truncated.body), /E_INPUT_INVALID/)
    },
  )

  it('refuses a bad resize when the service is defined, with E_SERVICE_DEFINITION', () => {
    const bad: unknown[] = [
      {},
      { width: 0 },
      { height: 1.5 },
      { width: 10, fit: 'inside' },
      { width: 10, height: 10, fit: 'stretch' },
      { height: 20000 },
    ]
    for (const resize of bad) {
      assert.throws(
        () => io.image({ resize: resize as never }),
        (e: unknown) => isBundleError(e) && e.code === 'E_SERVICE_DEFINITION',
        JSON.stringify(resize),
      )
    }
  })
})
