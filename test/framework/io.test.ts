import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import sharp from 'sharp'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io } from '../../framework/index.js'

async function app() {
  const def = defineService({
    name: 'io',
    apis: {
      size: defineApi({
        input: io.image(),
        output: io.json(z.object({ width: z.number(), height: z.number(), first: z.array(z.number()) })),
        handler: async (img) => ({ width: img.width, height: img.height, first: [...img.data.slice(0, 3)] }),
      }),
      double: defineApi({
        input: io.tensor({ dtype: 'float32', shape: [-1, 3] }),
        output: io.tensor({ dtype: 'float32' }),
        handler: async (t) => ({ ...t, data: t.data.map((x) => x * 2) }),
      }),
      echo: defineApi({ input: io.file(), output: io.file(), handler: async (f) => f }),
      both: defineApi({
        input: io.multipart({ image: io.image(), options: io.json(z.object({ tag: z.string() })) }),
        output: io.json(z.object({ tag: z.string(), pixels: z.number() })),
        handler: async ({ image, options }) => ({ tag: options.tag, pixels: image.width * image.height }),
      }),
    },
  })
  const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
  await svc.start()
  return svc.app
}

const red = (format: 'png' | 'jpeg' | 'webp') =>
  sharp({ create: { width: 4, height: 2, channels: 3, background: { r: 255, g: 0, b: 0 } } })
    [format]()
    .toBuffer()

describe('IO types over HTTP', () => {
  it('image: PNG, JPEG and WebP decode to RGB pixels; garbage is 400; wrong type 415', async () => {
    const a = await app()
    for (const f of ['png', 'jpeg', 'webp'] as const) {
      const r = await a.request('/size', {
        method: 'POST',
        headers: { 'content-type': `image/${f}` },
        body: new Uint8Array(await red(f)),
      })
      const body = (await r.json()) as { width: number; height: number; first: number[] }
      assert.equal(r.status, 200, f)
      assert.deepEqual([body.width, body.height], [4, 2])
      assert.ok(body.first[0]! > 240 && body.first[1]! < 15, `${f} pixel is red: ${body.first}`)
    }
    assert.equal(
      (await a.request('/size', { method: 'POST', headers: { 'content-type': 'image/png' }, body: 'not a png' }))
        .status,
      400,
    )
    assert.equal(
      (await a.request('/size', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status,
      415,
    )
  })

  it('tensor: raw little-endian body with shape header, and JSON; bad shapes are 400', async () => {
    const a = await app()
    const data = new Float32Array([1, 2, 3, 4, 5, 6])
    const raw = await a.request('/double', {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'x-tensor-shape': '2,3',
        'x-tensor-dtype': 'float32',
        accept: 'application/octet-stream',
      },
      body: new Uint8Array(data.buffer),
    })
    assert.equal(raw.status, 200)
    assert.equal(raw.headers.get('x-tensor-shape'), '2,3')
    assert.deepEqual([...new Float32Array(await raw.arrayBuffer())], [2, 4, 6, 8, 10, 12])
    const json = await a.request('/double', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ shape: [1, 3], dtype: 'float32', data: [[1, 2, 3]] }),
    })
    assert.deepEqual(await json.json(), { shape: [1, 3], dtype: 'float32', data: [2, 4, 6] })
    const wrongShape = await a.request('/double', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '2,2' },
      body: new Uint8Array(16),
    })
    assert.equal(wrongShape.status, 400)
    assert.match(
      ((await wrongShape.json()) as { error: { message: string } }).error.message,
      /does not match the declared \[-1,3\]/,
    )
    const short = await a.request('/double', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '2,3' },
      body: new Uint8Array(7),
    })
    assert.equal(short.status, 400)
    const count = await a.request('/double', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ shape: [1, 3], data: [1, 2] }),
    })
    assert.equal(count.status, 400)
  })

  it('file: bytes and media type round-trip', async () => {
    const a = await app()
    const r = await a.request('/echo', {
      method: 'POST',
      headers: { 'content-type': 'application/pdf' },
      body: new Uint8Array([37, 80, 68, 70]),
    })
    assert.equal(r.headers.get('content-type'), 'application/pdf')
    assert.deepEqual([...new Uint8Array(await r.arrayBuffer())], [37, 80, 68, 70])
  })

  it('multipart: named parts decoded by their own types; a missing part is 400', async () => {
    const a = await app()
    const form = new FormData()
    form.append('image', new Blob([new Uint8Array(await red('png'))], { type: 'image/png' }), 'red.png')
    form.append('options', new Blob([JSON.stringify({ tag: 'x' })], { type: 'application/json' }))
    const req = new Request('http://x/both', { method: 'POST', body: form })
    const r = await a.request(req)
    assert.equal(r.status, 200)
    assert.deepEqual(await r.json(), { tag: 'x', pixels: 8 })
    const partial = new FormData()
    partial.append('options', new Blob([JSON.stringify({ tag: 'x' })], { type: 'application/json' }))
    const missing = await a.request(new Request('http://x/both', { method: 'POST', body: partial }))
    assert.equal(missing.status, 400)
  })
})
