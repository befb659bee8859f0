import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io, type ServiceApp } from '../../framework/index.js'
import { bundle } from '../utils/cli.js'
import { parsePrometheus } from '../utils/prom.js'
import { auth, KEY, post, useSecureService, silent } from './secure-service.js'

// The API key in front of every route but the documented open ones (enumerated from the app, so
// a route added later without auth fails here), and CORS off unless configured.

// Open without the key, by route pattern as the app declares it; everything else must need it.
const OPEN = new Set([
  '/',
  '/livez',
  '/healthz',
  '/readyz',
  '/metrics',
  '/openapi.json',
  '/docs',
  '/docs/assets/:name',
  '/v2',
  '/v2/health/live',
  '/v2/health/ready',
  '/v2/models/stats',
  '/v2/models/:model',
  '/v2/models/:model/ready',
  '/v2/models/:model/config',
  '/v2/models/:model/stats',
  '/v2/models/:model/versions/:version',
  '/v2/models/:model/versions/:version/ready',
  '/v2/models/:model/versions/:version/config',
  '/v2/models/:model/versions/:version/stats',
])

describe('security defaults: who may call', () => {
  let svc: ServiceApp
  useSecureService((s) => (svc = s))

  describe('API key', () => {
    it('every route the app declares needs the key unless it is one of the documented open ones', async () => {
      const routes = svc.app.routes
        .filter((r) => r.path !== '/*')
        .map((r) => ({ method: r.method === 'ALL' ? 'PUT' : r.method, path: r.path }))
      const seen = new Set(routes.map((r) => r.path))
      // The enumeration reaches every family: service APIs, tasks, /v2 inference and repository.
      for (const p of [
        '/echo',
        '/job/submit',
        '/job/status',
        '/job/result',
        '/job/cancel',
        '/job/retry',
        '/v2/models/:model/infer',
        '/v2/repository/index',
        '/v2/repository/models/:model/load',
        '/v2/repository/models/:model/unload',
        '/runners',
      ])
        assert.ok(seen.has(p), `${p} is among the app's routes`)
      const concrete = (path: string, model: string) =>
        path.replace(':model', model).replace(':version', '1.0.0').replace(':name', 'swagger-ui.css')
      let closed = 0
      for (const r of routes) {
        const open = OPEN.has(r.path)
        if (open) assert.ok(r.method === 'GET' || r.method === 'PUT', `open routes only read: ${r.method} ${r.path}`)
        const path = concrete(r.path, 'ident')
        const none = await svc.app.request(path, { method: r.method })
        const wrong = await svc.app.request(path, { method: r.method, headers: { authorization: 'Bearer x' } })
        if (open) {
          assert.notEqual(none.status, 401, `${r.method} ${r.path} is open`)
          continue
        }
        closed++
        for (const res of [none, wrong]) {
          assert.equal(res.status, 401, `${r.method} ${r.path} without the right key`)
          assert.equal(res.headers.get('www-authenticate'), 'Bearer')
          const body = (await res.json()) as { error: string | { code: string } }
          // /v2 keeps the protocol's error shape; the rest the framework's.
          if (r.path.startsWith('/v2')) assert.equal(typeof body.error, 'string')
          else assert.equal((body.error as { code: string }).code, 'E_HTTP_UNAUTHORIZED')
        }
        // With the key, the same request gets past auth (to its own 2xx/4xx; a model that is not there, so nothing
        // changes).
        const keyed = await svc.app.request(concrete(r.path, 'nope'), { method: r.method, headers: auth })
        assert.notEqual(keyed.status, 401, `${r.method} ${r.path} with the key`)
      }
      assert.ok(closed >= 20, `${closed} routes need the key`)
      // Paths no route declares need the key too: a client without it learns nothing of what exists.
      assert.equal((await svc.app.request('/nowhere')).status, 401)
      // Keys of other lengths, schemes and spacing are refused, not crashed on (the comparison hashes both sides).
      for (const h of ['Bearer', 'Bearer ', `Bearer ${KEY}x`, `Basic ${KEY}`, `Bearer ${'k'.repeat(5000)}`])
        assert.equal(
          (
            await svc.app.request('/echo', {
              method: 'POST',
              headers: { authorization: h, 'content-type': 'application/json' },
              body: '{"v":1}',
            })
          ).status,
          401,
          h,
        )
      assert.equal(
        (
          await post(svc.app, '/echo', '{"v":1}', {
            'content-type': 'application/json',
            authorization: `bearer   ${KEY}  `,
          })
        ).status,
        200,
      )
      // Refused calls still show in the endpoint's metrics.
      const samples = parsePrometheus(await (await svc.app.request('/metrics')).text())
      assert.ok(
        (samples.find(
          (s) => s.name === 'bundle_request_total' && s.labels.endpoint === 'echo' && s.labels.status === '401',
        )?.value ?? 0) >= 6,
      )
    })
  })

  describe('CORS', () => {
    const preflight = (app: ServiceApp['app'], origin: string) =>
      app.request('/echo', {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type',
        },
      })

    it('is off by default: no response grants any origin, and a preflight gets nothing', async () => {
      for (const r of [
        await svc.app.request('/livez', { headers: { origin: 'https://evil.example' } }),
        await post(svc.app, '/echo', '{"v":1}', {
          'content-type': 'application/json',
          origin: 'https://evil.example',
        }),
        await svc.app.request('/echo', { method: 'POST', headers: { origin: 'https://evil.example' } }),
        await preflight(svc.app, 'https://evil.example'),
      ]) {
        assert.equal(r.headers.get('access-control-allow-origin'), null)
        assert.equal(r.headers.get('access-control-allow-headers'), null)
      }
    })

    it('--cors-origin grants exactly the listed origins, preflights included, before the key is checked', async () => {
      const def = defineService({
        name: 'c',
        apis: {
          echo: defineApi({
            input: io.json(z.object({ v: z.number() })),
            output: io.json(z.object({ v: z.number() })),
            handler: async (x) => x,
          }),
        },
      })
      const app = createServiceApp(def, {
        logger: silent,
        apiKey: KEY,
        corsOrigins: ['https://app.example', 'http://localhost:5173'],
      })
      await app.start()
      const pre = await preflight(app.app, 'https://app.example')
      assert.equal(pre.status, 204)
      assert.equal(pre.headers.get('access-control-allow-origin'), 'https://app.example')
      assert.match(pre.headers.get('access-control-allow-methods')!, /POST/)
      assert.match(pre.headers.get('access-control-allow-headers')!, /authorization/)
      assert.equal(pre.headers.get('access-control-allow-credentials'), null)
      assert.equal((await preflight(app.app, 'https://evil.example')).headers.get('access-control-allow-origin'), null)
      const ok = await post(app.app, '/echo', '{"v":1}', {
        'content-type': 'application/json',
        origin: 'http://localhost:5173',
      })
      assert.equal(ok.status, 200)
      assert.equal(ok.headers.get('access-control-allow-origin'), 'http://localhost:5173')
      assert.match(ok.headers.get('access-control-expose-headers')!, /x-request-id/)
      assert.match(ok.headers.get('vary')!, /origin/i)
      // The browser can read why it was refused.
      const noKey = await app.app.request('/echo', {
        method: 'POST',
        headers: { origin: 'https://app.example', 'content-type': 'application/json' },
        body: '{"v":1}',
      })
      assert.equal(noKey.status, 401)
      assert.equal(noKey.headers.get('access-control-allow-origin'), 'https://app.example')
      const other = await post(app.app, '/echo', '{"v":1}', {
        'content-type': 'application/json',
        origin: 'https://evil.example',
      })
      assert.equal(other.headers.get('access-control-allow-origin'), null)
      await app.stop()
    })

    it('bundle serve refuses a --cors-origin that is not an origin', async () => {
      const r = await bundle(['serve', 'examples/greeter/service.ts', '--cors-origin', 'app.example/path'])
      assert.equal(r.code, 2)
      assert.match(r.stderr, /E_CLI_USAGE: --cors-origin "app\.example\/path" must be an origin/)
    })
  })
})
