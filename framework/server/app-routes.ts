import { randomUUID } from 'node:crypto'
import { BundleError, isBundleError } from '../../errors/index.js'
import type { AppParts, ServerHono } from './app-parts.js'
import type { Protocol } from './app.js'
import { INFRA_ROUTES, isOpenPath } from '../routes.js'
import { corsMiddleware } from './cors.js'
import { docsAsset, docsPage } from './docs.js'
import { errorResponse } from './error-response.js'
import { ExchangeHeaders, honoExchange, type Answer } from './exchange.js'
import { openapiDocument } from './openapi.js'
import { frameworkVersion, headerOf, SANE_REQUEST_ID } from './request.js'
import { readableOf, StreamAnswer } from './streaming.js'
import { mountTaskRoutes } from './tasks/routes.js'
import { isWebSocketApi } from './websocket/routes.js'
import { mountV2, v2Error } from './v2/routes.js'

// The steps createServiceApp (app.ts) mounts, in order: request ids and the access log, CORS and
// the API key, the operational routes, /v2, the service's own routes, and errors.

/** The operational routes' paths (not the root's redirect or the docs assets): other methods get 405. */
const INFRA_PATHS = INFRA_ROUTES.filter((r) => r.path !== '/' && !r.path.includes(':')).map((r) => r.path)

/** Every request gets an id (the client's, if sane), an access-log line, and Connection: close while draining. */
export function requestIds(app: ServerHono, p: AppParts): void {
  app.use('*', async (c, next) => {
    const given = headerOf(c, 'x-request-id')
    const requestId = given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
    c.set('requestId', requestId)
    const started = performance.now()
    await next()
    // API responses and errors already carry the id in a plain header object (the fast path:
    // a Headers instance costs node-server a sort and a copy); other routes get it here.
    if (!c.get('headed')) c.res.headers.set('x-request-id', requestId)
    // While draining, tell keep-alive clients to reconnect (to another replica).
    if (p.lifecycle.phase === 'draining') c.res.headers.set('connection', 'close')
    p.logAccess?.(
      c.req.method,
      c.req.path,
      c.res.status,
      Math.round((performance.now() - started) * 100) / 100,
      requestId,
      c.get('trace'),
    )
  })
}

/**
 * CORS, then the API key: one check in front of every route, so a route added later is closed
 * unless auth.ts opens it.
 */
export function keyGate(app: ServerHono, p: AppParts): void {
  // CORS before the key check: a browser's preflight carries no Authorization header.
  const cors = corsMiddleware(p.options.corsOrigins ?? [])
  if (cors) app.use('*', cors)
  const checkKey = p.checkKey
  if (!checkKey) return
  const apiAt = new Map(p.definition.apis.filter((a) => !a.task).map((a) => [a.route, a]))
  app.use('*', async (c, next) => {
    const path = c.req.path
    if (!isOpenPath(path)) {
      try {
        checkKey(headerOf(c, 'authorization'))
      } catch (err) {
        const a = c.req.method === 'POST' ? apiAt.get(path) : undefined
        if (a) {
          // Refused calls still count in the endpoint's request metrics.
          const m = p.metrics.endpoint(a.name)
          m.begin()
          m.end(401, 0)
        }
        if (path === '/v2' || path.startsWith('/v2/')) return v2Error(c, err, p.log)
        throw err
      }
    }
    await next()
  })
}

/** Probes, /runners, /metrics, the OpenAPI document and its docs page. */
export function infraRoutes(app: ServerHono, p: AppParts): void {
  const { lifecycle, definition, repository, metrics } = p
  app.get('/livez', (c) => c.json({ status: 'live' }))
  app.get('/healthz', (c) => c.json({ status: 'live' }))
  app.get('/readyz', (c) => {
    const phase = lifecycle.phase
    const waiting = phase === 'ready' ? lifecycle.notReady() : undefined
    if (phase === 'ready' && waiting === undefined) return c.json({ status: 'ready' })
    return c.json({ status: phase === 'ready' ? 'not ready' : phase, reason: waiting ?? lifecycle.reason }, 503)
  })
  // The service's runners, then the models loaded at run time (/v2/repository, bundle serve --models).
  app.get('/runners', (c) =>
    c.json(
      [...definition.runners, ...repository.loaded()].map((r) => {
        const batcher = r.stats()
        return { name: r.name, ready: r.ready(), config: r.effectiveConfig(), ...(batcher ? { batcher } : {}) }
      }),
    ),
  )
  app.get('/metrics', async (c) =>
    c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }),
  )
  const openapi = JSON.stringify(openapiDocument(definition, p.options.version))
  app.get('/openapi.json', (c) => c.body(openapi, 200, { 'content-type': 'application/json' }))
  app.get('/docs', (c) => c.html(docsPage(definition.name)))
  app.get('/docs/assets/:name', (c) => {
    const asset = docsAsset(c.req.param('name'))
    if (asset === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `no docs asset ${c.req.param('name')}`)
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, {
      'content-type': asset.contentType,
      'cache-control': 'public, max-age=86400',
    })
  })
  app.get('/', (c) => c.redirect('/docs'))
}

/** What the Open Inference Protocol serves, over /v2 here and gRPC in serve(). */
export function protocolOf(p: AppParts): Protocol {
  return {
    repository: p.repository,
    ready: () => p.lifecycle.phase === 'ready' && p.lifecycle.notReady() === undefined,
    maxBodyBytes: p.maxBodyBytes,
    version: frameworkVersion(),
    log: p.log,
    track: (fn) => p.pipeline.track(fn),
    ...(p.checkKey ? { checkKey: p.checkKey } : {}),
  }
}

/** /v2, task routes, WebSocket routes and each API's POST route (other methods: 405). */
export function serviceRoutes(app: ServerHono, p: AppParts, protocol: Protocol): void {
  const { lifecycle, pipeline, tasks, log } = p
  mountV2(app, protocol)
  if (tasks)
    mountTaskRoutes(app, tasks, {
      decode: async (c, a) => {
        if (lifecycle.phase !== 'ready' || lifecycle.instance === undefined) throw lifecycle.notServing()
        const ex = honoExchange(c)
        return await pipeline.decodeInput(new ExchangeHeaders(ex), a, await pipeline.readInput(ex, a))
      },
      respond: (c, err) => errorResponse(err, c.get('requestId') ?? randomUUID(), log),
    })
  p.sockets.mount(app)
  for (const a of p.definition.apis) {
    if (a.task || isWebSocketApi(a)) continue
    app.post(a.route, async (c) => {
      const answer = await new Promise<Answer>(
        (resolve, reject) => void pipeline.handle(honoExchange(c), a, c.get('requestId'), resolve).catch(reject),
      )
      // Plain header objects: a Headers instance costs node-server a sort and a copy.
      c.set('headed', true)
      if (answer.trace) c.set('trace', answer.trace)
      const body = answer.body instanceof StreamAnswer ? readableOf(answer.body) : answer.body
      return c.body(body as Uint8Array<ArrayBuffer> | string, answer.status as 200, answer.headers)
    })
    app.all(a.route, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${a.route} takes POST`)
    })
  }
}

/** 405 on the operational routes' other methods, 404 elsewhere, and every error in the one JSON shape. */
export function errorHandling(app: ServerHono, p: AppParts): void {
  for (const path of INFRA_PATHS) {
    app.all(path, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${path} takes GET`)
    })
  }
  app.notFound((c) =>
    errorResponse(
      new BundleError('E_HTTP_NOT_FOUND', `no route for ${c.req.method} ${c.req.path}`),
      c.get('requestId') ?? randomUUID(),
      p.log,
    ),
  )
  app.onError((err, c) => {
    const allow: Record<string, string> =
      isBundleError(err) && err.code === 'E_HTTP_METHOD_NOT_ALLOWED'
        ? { allow: p.definition.apis.some((a) => a.route === c.req.path) ? 'POST' : 'GET' }
        : {}
    return errorResponse(err, c.get('requestId') ?? randomUUID(), p.log, allow)
  })
}
