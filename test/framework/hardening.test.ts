import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import {
  api,
  createClient,
  createServiceApp,
  defineApi,
  defineService,
  definitionOf,
  io,
  serve,
  service,
  type ApiContext,
} from '../../framework/index.js'
import { until } from '../utils/until.js'

const silent = pino({ level: 'silent' })

async function appOf(def: Parameters<typeof createServiceApp>[0]) {
  const svc = createServiceApp(def, { logger: silent })
  await svc.start()
  return svc.app
}

describe('hostile inputs and edge cases', () => {
  it('deeply nested or ragged tensor JSON is a 400, not a stack overflow', async () => {
    const app = await appOf(
      defineService({
        name: 't',
        apis: {
          t: defineApi({
            input: io.tensor({ dtype: 'float32' }),
            output: io.text(),
            handler: async (x) => String(x.data.length),
          }),
        },
      }),
    )
    const deep = `{"shape":[1],"data":${'['.repeat(200_000)}1${']'.repeat(200_000)}}`
    const r1 = await app.request('/t', { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep })
    assert.equal(r1.status, 400)
    const r2 = await app.request('/t', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ shape: [2, 2], data: [[1, 2], [3]] }),
    })
    assert.equal(r2.status, 400)
    const r3 = await app.request('/t', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        shape: [2, 2],
        data: [
          [1, 2],
          [3, 4],
        ],
      }),
    })
    assert.equal(await r3.text(), '4')
  })

  it('empty bodies are a 400 for every input kind, never a 500 (found by the route fuzz)', async () => {
    const app = await appOf(
      defineService({
        name: 'e',
        apis: {
          i: defineApi({ input: io.image(), output: io.text(), handler: async (img) => `${img.width}` }),
          t: defineApi({
            input: io.tensor({ dtype: 'float32', shape: [-1, 2] }),
            output: io.text(),
            handler: async (x) => `${x.data.length}`,
          }),
          j: defineApi({
            input: io.json(z.object({ a: z.number() })),
            output: io.text(),
            handler: async ({ a }) => `${a}`,
          }),
        },
      }),
    )
    for (const [path, type] of [
      ['/i', 'image/jpeg'],
      ['/i', 'image/png'],
      ['/t', 'application/octet-stream'],
      ['/t', 'application/json'],
      ['/j', 'application/json'],
    ] as const) {
      const r = await app.request(path, { method: 'POST', headers: { 'content-type': type }, body: new Uint8Array(0) })
      assert.equal(r.status, 400, `${path} ${type}: ${await r.text()}`)
    }
    const form = new FormData()
    form.append('image', new Blob([]), 'empty.png')
    assert.equal((await app.request('/i', { method: 'POST', body: form })).status, 400)
  })

  it('an SVG sent as image/png is refused before rasterising', async () => {
    const app = await appOf(
      defineService({
        name: 'i',
        apis: { i: defineApi({ input: io.image(), output: io.text(), handler: async (img) => `${img.width}` }) },
      }),
    )
    const svg =
      '<svg xmlns="http://www.w3.org/2000/svg" width="20000" height="3000"><rect width="100%" height="100%"/></svg>'
    const r = await app.request('/i', { method: 'POST', headers: { 'content-type': 'image/png' }, body: svg })
    assert.equal(r.status, 400)
    assert.match(((await r.json()) as { error: { message: string } }).error.message, /not a PNG, JPEG or WebP/)
  })

  it('a non-ASCII download name is sent as RFC 5987 filename*', async () => {
    const app = await appOf(
      defineService({
        name: 'f',
        apis: {
          f: defineApi({
            input: io.text(),
            output: io.file(),
            handler: async () => ({
              bytes: new Uint8Array([1]),
              mediaType: 'application/pdf',
              filename: 'résumé😀.pdf',
            }),
          }),
        },
      }),
    )
    const r = await app.request('/f', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })
    assert.equal(r.status, 200)
    assert.match(r.headers.get('content-disposition')!, /filename\*=UTF-8''r%C3%A9sum%C3%A9%F0%9F%98%80\.pdf/)
  })

  it('subclassed services keep their own APIs', () => {
    class Base {
      @api({ input: io.text(), output: io.text() })
      async a(s: string) {
        return s
      }
    }
    @service({ name: 'sub-one' })
    class One extends Base {
      @api({ input: io.text(), output: io.text() })
      async b(s: string) {
        return s
      }
    }
    @service({ name: 'sub-two' })
    class Two extends Base {
      @api({ input: io.text(), output: io.text() })
      async c(s: string) {
        return s
      }
    }
    assert.deepEqual(
      definitionOf(One)!.apis.map((x) => x.route),
      ['/a', '/b'],
    )
    assert.deepEqual(
      definitionOf(Two)!.apis.map((x) => x.route),
      ['/a', '/c'],
    )
  })

  it('ctx.signal read after a timeout is already aborted', async () => {
    let seen: boolean | undefined
    const app = await appOf(
      defineService({
        name: 's',
        traffic: { timeoutMs: 50 },
        apis: {
          slow: defineApi({
            input: io.text(),
            output: io.text(),
            handler: async (_: string, ctx: ApiContext) => {
              // Outlives the 50 ms timeout on purpose; both timers share one loop, so load keeps their order.
              await new Promise((r) => setTimeout(r, 150))
              seen = ctx.signal.aborted
              return 'late'
            },
          }),
        },
      }),
    )
    const r = await app.request('/slow', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })
    assert.equal(r.status, 504)
    await until('the timed-out handler to read its signal', () => seen !== undefined)
    assert.equal(seen, true)
  })
})

describe('over a socket', () => {
  it(
    '401 names the scheme; headers too large get a JSON ' + '431; the client retries discovery and merges headers',
    async () => {
      const def = defineService({
        name: 'k',
        apis: {
          echo: defineApi({
            input: io.json(z.object({ v: z.number() })),
            output: io.json(z.object({ v: z.number() })),
            handler: async (x) => x,
          }),
        },
      })
      const running = await serve(def, { port: 0, handleSignals: false, logger: silent, apiKey: 'k' })
      try {
        const r = await fetch(`${running.url}/echo`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"v":1}',
        })
        assert.equal(r.status, 401)
        assert.equal(r.headers.get('www-authenticate'), 'Bearer')

        const raw = await new Promise<string>((resolve) => {
          const sock = connect(Number(new URL(running.url).port), '127.0.0.1')
          let out = ''
          sock.on('data', (d) => (out += d))
          sock.on('close', () => resolve(out))
          sock.on('error', () => resolve(out))
          sock.write(`GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`)
        })
        assert.match(raw, /^HTTP\/1\.1 431 /)
        assert.match(raw, /"error":\{"code":"E_HTTP_HEADERS_TOO_LARGE"/)

        const client = createClient<never>(running.url, {
          apiKey: 'k',
          headers: { 'Content-Type': 'application/json' },
        }) as unknown as { echo(x: unknown): Promise<unknown> }
        assert.deepEqual(await client.echo({ v: 2 }), { v: 2 })
      } finally {
        await running.close()
      }
      const early = createClient<never>(running.url) as unknown as { echo(x: unknown): Promise<unknown> }
      await assert.rejects(early.echo({ v: 1 }), (e: { code?: string }) => e.code === 'E_CLIENT_CONNECTION')
    },
  )
})
