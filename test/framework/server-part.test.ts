import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isBundleError } from '../../errors/index.js'
import { GRPC_ROUTES } from '../../framework/routes.js'
import { route } from '../../framework/route-spec.js'
import { inferenceHandlers } from '../../framework/server/grpc/service.js'
import { bind, RouteIndex } from '../../framework/server/part.js'

// A part's routes are declared once and joined to their handlers by bind(): a route without a
// handler, or a handler without a route, fails when the app is made.

const ok = () => new Response('ok')

describe('server parts', () => {
  it('bind joins declared routes to handlers by METHOD path', () => {
    const routes = bind([route('GET', '/a', 'open', 'infra', 'a'), route('POST', '/b', 'keyed', 'api', 'b')], {
      'GET /a': ok,
      'POST /b': ok,
    })
    assert.deepEqual(
      routes.map((r) => [r.method, r.path, r.access, typeof r.handler]),
      [
        ['GET', '/a', 'open', 'function'],
        ['POST', '/b', 'keyed', 'function'],
      ],
    )
  })

  it('a declared route without a handler, or a handler for an undeclared route, is refused', () => {
    const missing = () => bind([route('GET', '/a', 'open', 'infra', 'a')], {})
    assert.throws(missing, (err) => isBundleError(err) && /GET \/a is declared without a handler/.test(err.message))
    const extra = () => bind([], { 'GET /z': ok })
    assert.throws(extra, (err) => isBundleError(err) && /undeclared routes: GET \/z/.test(err.message))
  })

  it('RouteIndex finds exact and parameterised routes; open only where a route says so', () => {
    const index = new RouteIndex([
      route('GET', '/v2/models/:model', 'open', 'v2', 'metadata'),
      route('POST', '/v2/models/:model/infer', 'keyed', 'v2', 'infer'),
      route('GET', '/livez', 'open', 'infra', 'live'),
    ])
    assert.equal(index.isOpen('/livez'), true)
    assert.equal(index.isOpen('/v2/models/m'), true)
    assert.equal(index.isOpen('/v2/models/m/infer'), false)
    assert.equal(index.isOpen('/v2/models/m/x/y'), false)
    assert.equal(index.isOpen('/nothing'), false)
    assert.deepEqual(
      index.at('/v2/models/m/infer').map((r) => r.what),
      ['infer'],
    )
  })

  it('the gRPC handlers are exactly the methods its route list declares', () => {
    const { handlers } = inferenceHandlers({} as never)
    assert.deepEqual(Object.keys(handlers).sort(), GRPC_ROUTES.map((r) => r.path).sort())
  })
})
