import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io } from '../../framework/index.js'
import { GRPC_ROUTES, isReserved, type RouteSpec } from '../../framework/routes.js'
import { RouteIndex } from '../../framework/server/part.js'
import { RedisLink } from '../../runners/index.js'
import { BIN } from '../utils/cli.js'

// The routes the app's parts declare are the truth: the server answers every route it mounted,
// with the key exactly where the route says, and nothing it does not list answers without the key.

const KEY = 'route-table-key'

const definition = () =>
  defineService({
    name: 'routes',
    apis: {
      echo: defineApi({ input: io.json(z.object({ x: z.number() })), output: io.json(z.any()), handler: (i) => i }),
      later: defineApi({
        input: io.json(z.object({ x: z.number() })),
        output: io.json(z.any()),
        task: true,
        handler: (i) => i,
      }),
      socket: defineApi({
        input: io.stream(io.json(z.object({}))),
        output: io.stream(io.text()),
        handler: async function* () {
          yield 'hi'
        },
      }),
    },
  })

/** The route with its parameters filled in. */
const concrete = (r: RouteSpec) =>
  r.path.replace(':model', 'nosuch').replace(':version', '1').replace(':name', 'swagger-ui.css')

describe('the route table', () => {
  const link = new RedisLink(process.env.BUNDLE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', 'mbroutes')
  after(() => link.close())
  const def = definition()
  const service = createServiceApp(def, { apiKey: KEY, redis: link, logger: pino({ level: 'silent' }) })
  const app = service.app
  const table = service.routes
  const index = new RouteIndex(table)

  it('lists the service routes: an API, a task API (five routes), a WebSocket API', () => {
    const own = table.filter((r) => r.part !== 'infra' && r.part !== 'v2').map((r) => `${r.method} ${r.path}`)
    assert.deepEqual(own, [
      'POST /later/submit',
      'GET /later/status',
      'GET /later/result',
      'POST /later/cancel',
      'POST /later/retry',
      'GET /socket',
      'POST /echo',
    ])
  })

  it('lists what is mounted: no task routes without Redis, the gRPC methods with a gRPC port', () => {
    const bare = createServiceApp(def, { logger: pino({ level: 'silent' }) }).routes
    assert.equal(bare.filter((r) => r.part === 'task').length, 0)
    assert.equal(bare.filter((r) => r.part === 'grpc').length, 0)
    const withGrpc = createServiceApp(def, { grpcPort: 0, logger: pino({ level: 'silent' }) })
    assert.deepEqual(
      withGrpc.routes.filter((r) => r.part === 'grpc'),
      [...GRPC_ROUTES],
    )
    assert.deepEqual(
      withGrpc.ports.map((p) => p.name),
      ['grpc'],
    )
  })

  it("every other method of a route's path is 405 with Allow, in its part's shape", async () => {
    const auth = { authorization: `Bearer ${KEY}` }
    const cases: [string, string, string, RegExp][] = [
      ['DELETE', '/livez', 'GET', /"code":"E_HTTP_METHOD_NOT_ALLOWED"/],
      ['GET', '/echo', 'POST', /"code":"E_HTTP_METHOD_NOT_ALLOWED"/],
      ['PUT', '/later/status', 'GET', /"code":"E_HTTP_METHOD_NOT_ALLOWED"/],
      ['POST', '/socket', 'GET', /"code":"E_HTTP_METHOD_NOT_ALLOWED"/],
      // /v2 answers errors as the protocol has them: {"error": "..."}.
      ['GET', '/v2/models/nosuch/infer', 'POST', /^\{"error":"\/v2\/models\/:model\/infer takes POST"\}$/],
      ['DELETE', '/v2/models/nosuch', 'GET', /^\{"error":/],
    ]
    for (const [method, path, allow, body] of cases) {
      const r = await app.request(path, { method, headers: auth })
      assert.equal(r.status, 405, `${method} ${path}`)
      assert.equal(r.headers.get('allow'), allow, `${method} ${path}`)
      assert.match(await r.text(), body, `${method} ${path}`)
    }
  })

  it('the OpenAPI document lists the infra routes that declare their answers', async () => {
    const doc = (await (await app.request('/openapi.json')).json()) as { paths: Record<string, unknown> }
    const infra = Object.keys(doc.paths).filter((p) => table.some((r) => r.part === 'infra' && r.path === p))
    assert.deepEqual(infra.sort(), ['/healthz', '/livez', '/metrics', '/readyz'])
  })

  it('every route it lists is answered (never "no route"), keyed ones 401 without the key', async () => {
    for (const r of table) {
      const path = concrete(r)
      const init = (key?: string): RequestInit => ({
        method: r.method,
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        ...(r.method === 'POST' ? { body: '{}' } : {}),
      })
      const withKey = await app.request(path, init(KEY))
      const body = withKey.headers.get('content-type')?.includes('json') ? await withKey.text() : ''
      assert.doesNotMatch(body, /E_HTTP_NOT_FOUND/, `${r.method} ${path} is answered`)
      assert.notEqual(withKey.status, 405, `${r.method} ${path} takes ${r.method}`)
      const without = await app.request(path, init())
      if (r.access === 'keyed') assert.equal(without.status, 401, `${r.method} ${path} needs the key`)
      else assert.notEqual(without.status, 401, `${r.method} ${path} is open`)
      assert.equal(index.isOpen(path), r.access === 'open', `isOpen(${path})`)
    }
  })

  it('a path it does not list needs the key, then is not found', async () => {
    assert.equal((await app.request('/nothing/here')).status, 401)
    const r = await app.request('/nothing/here', { headers: { authorization: `Bearer ${KEY}` } })
    assert.equal(r.status, 404)
  })

  it("reserves the server's first segments for it", () => {
    for (const p of ['/v2', '/v2/anything', '/docs/x', '/runners', '/metrics', '/'])
      assert.equal(isReserved(p), true, p)
    for (const p of ['/v3', '/documents', '/echo']) assert.equal(isReserved(p), false, p)
  })

  it('`bundle serve --print-routes` prints it and exits without serving', { timeout: 60_000 }, () => {
    const greeter = fileURLToPath(new URL('../../examples/greeter/service.ts', import.meta.url))
    const r = spawnSync(process.execPath, [BIN, 'serve', greeter, '--print-routes'], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    const lines = r.stdout.trim().split('\n')
    assert.ok(
      lines.some((l) => /^POST\s+\/greet\s+keyed\s+greet$/.test(l)),
      r.stdout,
    )
    assert.ok(
      lines.some((l) => /^POST\s+\/shout\s+keyed\s+shout$/.test(l)),
      r.stdout,
    )
    assert.ok(
      lines.some((l) => /^GET\s+\/readyz\s+open\s/.test(l)),
      r.stdout,
    )
    assert.ok(
      lines.some((l) => /^POST\s+\/v2\/models\/:model\/infer\s+keyed\s/.test(l)),
      r.stdout,
    )
    assert.doesNotMatch(r.stdout, /listening/)
    const grpc = spawnSync(process.execPath, [BIN, 'serve', greeter, '--print-routes', '--grpc-port', '0'], {
      encoding: 'utf8',
    })
    assert.equal(grpc.status, 0, grpc.stderr)
    assert.match(grpc.stdout, /^RPC\s+ModelInfer\s+keyed\s+inference$/m)
    assert.match(grpc.stdout, /^RPC\s+ServerLive\s+open\s/m)
  })
})
