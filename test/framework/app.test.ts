import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { Greeter } from '../../examples/greeter/service.js'
import { createServiceApp, defineApi, defineService, definitionOf, io } from '../../framework/index.js'
import { parsePrometheus } from '../utils/prom.js'
import { until } from '../utils/until.js'

const silent = pino({ level: 'silent' })

async function greeterApp(options: { apiKey?: string; maxBodyBytes?: number } = {}) {
  const svc = createServiceApp(definitionOf(Greeter)!, { logger: silent, ...options })
  await svc.start()
  return svc
}

const post = (
  _path: string,
  body: string | Uint8Array,
  headers: Record<string, string> = { 'content-type': 'application/json' },
) => ({ method: 'POST', headers, body })

/** The JSON error shape, with no stack text anywhere in the body. */
async function errorOf(
  res: Response,
  status: number,
  code: string,
): Promise<{ code: string; message: string; details?: unknown; requestId: string }> {
  const text = await res.text()
  assert.equal(res.status, status, text)
  assert.doesNotMatch(text, /\s+at\s+\S+\s+\(|node:internal|\/work\//, 'no stack or internal path in the body')
  const body = JSON.parse(text) as { error: { code: string; message: string; requestId: string } }
  assert.equal(body.error.code, code)
  assert.equal(typeof body.error.message, 'string')
  assert.equal(body.error.requestId, res.headers.get('x-request-id'))
  return body.error
}

describe('service app (app.request)', () => {
  it('serves an API and runs the start-up hook first', async () => {
    const { app } = await greeterApp()
    const res = await app.request('/greet', post('/greet', JSON.stringify({ name: 'ada' })))
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { greeting: 'hello ada!' })
    const shout = await app.request('/shout', post('/shout', 'hi', { 'content-type': 'text/plain' }))
    assert.equal(await shout.text(), 'HI')
  })

  it('400 with validation issues, 400 for bad JSON', async () => {
    const { app } = await greeterApp()
    const invalid = await errorOf(
      await app.request('/greet', post('/greet', JSON.stringify({ name: '' }))),
      400,
      'E_INPUT_INVALID',
    )
    assert.deepEqual((invalid.details as { issues: { path: string[] }[] }).issues[0]!.path, ['name'])
    await errorOf(await app.request('/greet', post('/greet', '{"name":')), 400, 'E_INPUT_INVALID')
  })

  it('401 without or with a wrong API key; health stays open', async () => {
    const { app } = await greeterApp({ apiKey: 's3cret' })
    await errorOf(await app.request('/greet', post('/greet', '{"name":"a"}')), 401, 'E_HTTP_UNAUTHORIZED')
    await errorOf(
      await app.request(
        '/greet',
        post('/greet', '{"name":"a"}', { 'content-type': 'application/json', authorization: 'Bearer nope' }),
      ),
      401,
      'E_HTTP_UNAUTHORIZED',
    )
    const ok = await app.request(
      '/greet',
      post('/greet', '{"name":"a"}', { 'content-type': 'application/json', authorization: 'Bearer s3cret' }),
    )
    assert.equal(ok.status, 200)
    assert.equal((await app.request('/readyz')).status, 200)
    assert.equal((await app.request('/metrics')).status, 200)
  })

  it('404, 405 with Allow, 413, 415', async () => {
    const { app } = await greeterApp({ maxBodyBytes: 64 })
    await errorOf(await app.request('/nope'), 404, 'E_HTTP_NOT_FOUND')
    const m = await app.request('/greet')
    assert.equal(m.headers.get('allow'), 'POST')
    await errorOf(m, 405, 'E_HTTP_METHOD_NOT_ALLOWED')
    await errorOf(
      await app.request('/greet', post('/greet', JSON.stringify({ name: 'x'.repeat(100) }))),
      413,
      'E_HTTP_PAYLOAD_TOO_LARGE',
    )
    await errorOf(
      await app.request('/greet', post('/greet', 'name=a', { 'content-type': 'application/x-www-form-urlencoded' })),
      415,
      'E_HTTP_UNSUPPORTED_MEDIA_TYPE',
    )
  })

  it('503 before start-up finishes, then 200; /readyz follows', async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const def = defineService({
      name: 'slow-start',
      onStartup: () => gate,
      apis: { ping: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }) },
    })
    const svc = createServiceApp(def, { logger: silent })
    const starting = svc.start()
    const ready0 = await svc.app.request('/readyz')
    assert.equal(ready0.status, 503)
    assert.equal(((await ready0.json()) as { status: string }).status, 'starting')
    await errorOf(
      await svc.app.request('/ping', post('/ping', 'x', { 'content-type': 'text/plain' })),
      503,
      'E_HTTP_NOT_READY',
    )
    release()
    await starting
    assert.equal((await svc.app.request('/readyz')).status, 200)
    svc.drain()
    assert.equal((await svc.app.request('/readyz')).status, 503)
    assert.equal((await svc.app.request('/livez')).status, 200)
  })

  it('429 past maxConcurrency, 504 past timeoutMs, 500 without internals', async () => {
    let release!: () => void
    let holding = false
    const gate = new Promise<void>((r) => (release = r))
    const def = defineService({
      name: 'limits',
      traffic: { maxConcurrency: 1, timeoutMs: 200 },
      apis: {
        hold: defineApi({
          input: io.text(),
          output: io.text(),
          handler: async (t) => ((holding = true), await gate, t),
        }),
        hang: defineApi({ input: io.text(), output: io.text(), handler: () => new Promise<string>(() => undefined) }),
        boom: defineApi({
          input: io.text(),
          output: io.text(),
          handler: async () => {
            throw new Error('secret detail at /work/main/x.ts')
          },
        }),
        lie: defineApi({
          input: io.text(),
          output: io.json(z.object({ n: z.number() })),
          handler: async () => ({ n: 'nope' }) as unknown as { n: number },
        }),
      },
    })
    const svc = createServiceApp(def, { logger: silent })
    await svc.start()
    const text = (p: string) => svc.app.request(p, post(p, 'x', { 'content-type': 'text/plain' }))
    const held = text('/hold')
    await until('the first call to hold its slot', () => holding)
    await errorOf(await text('/hold'), 429, 'E_HTTP_TOO_MANY_REQUESTS')
    release()
    assert.equal((await held).status, 200)
    const boom = await errorOf(await text('/boom'), 500, 'E_INTERNAL')
    assert.doesNotMatch(boom.message, /secret/)
    const lie = await errorOf(await text('/lie'), 500, 'E_OUTPUT_INVALID')
    assert.equal(lie.details, undefined, 'our own output issues stay in the log')
    await errorOf(await text('/hang'), 504, 'E_HTTP_TIMEOUT')
    // The timed-out call is still running: it keeps its slot, so timeouts cannot pile up work.
    await errorOf(await text('/hold'), 429, 'E_HTTP_TOO_MANY_REQUESTS')
  })

  it('echoes a sane X-Request-Id and replaces a hostile one', async () => {
    const { app } = await greeterApp()
    const mine = await app.request('/livez', { headers: { 'x-request-id': 'req-123' } })
    assert.equal(mine.headers.get('x-request-id'), 'req-123')
    const bad = await app.request('/livez', { headers: { 'x-request-id': 'x'.repeat(300) } })
    assert.match(bad.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/)
  })

  it('/metrics has request series from the first scrape and the counters move', async () => {
    const { app } = await greeterApp()
    const first = await (await app.request('/metrics')).text()
    assert.match(first, /bundle_request_total\{service="greeter",endpoint="greet",status="200"\} 0/)
    assert.match(first, /bundle_request_total\{service="greeter",endpoint="greet",status="400"\} 0/)
    assert.match(first, /bundle_request_total\{service="greeter",endpoint="greet",status="500"\} 0/)
    assert.match(first, /process_cpu_user_seconds_total/)
    await app.request('/greet', post('/greet', '{"name":"a"}'))
    await app.request('/greet', post('/greet', '{}'))
    await app.request('/livez')
    const second = await (await app.request('/metrics')).text()
    const samples = parsePrometheus(second)
    const count = (status: string) =>
      samples.find(
        (x) => x.name === 'bundle_request_total' && x.labels.endpoint === 'greet' && x.labels.status === status,
      )?.value
    assert.equal(count('200'), 1)
    assert.equal(count('400'), 1)
    assert.ok(
      samples.some(
        (x) => x.name === 'bundle_request_duration_seconds_bucket' && x.labels.le === '+Inf' && x.value === 2,
      ),
    )
    assert.match(second, /bundle_request_total\{service="greeter",endpoint="greet",status="200"\} 1/)
    assert.match(second, /bundle_request_total\{service="greeter",endpoint="greet",status="400"\} 1/)
    assert.match(second, /bundle_request_duration_seconds_count\{service="greeter",endpoint="greet"\} 2/)
    assert.doesNotMatch(second, /endpoint="livez"/)
  })

  it('/openapi.json lists every API with its schemas; /docs is served from this server', async () => {
    const { app } = await greeterApp()
    const doc = (await (await app.request('/openapi.json')).json()) as {
      openapi: string
      paths: Record<
        string,
        { post?: { requestBody: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> } } }
      >
    }
    assert.equal(doc.openapi, '3.1.0')
    assert.deepEqual(doc.paths['/greet']!.post!.requestBody.content['application/json']!.schema.properties!.name, {
      type: 'string',
      minLength: 1,
      maxLength: 100,
    })
    assert.ok(doc.paths['/shout']!.post!.requestBody.content['text/plain'])
    const html = await (await app.request('/docs')).text()
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
    assert.ok(assets.length >= 3)
    for (const a of assets) {
      assert.ok(a.startsWith('/'), `${a} is served locally, not from a CDN`)
      const r = await app.request(a)
      assert.equal(r.status, 200, a)
      assert.ok((await r.arrayBuffer()).byteLength > 100)
    }
    const root = await app.request('/')
    assert.equal(root.status, 302)
    assert.equal(root.headers.get('location'), '/docs')
  })
})
