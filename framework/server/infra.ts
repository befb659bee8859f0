import { BundleError } from '../../errors/index.js'
import type { AppParts } from './app-parts.js'
import { docsAsset, docsPage } from './docs.js'
import { INFRA_ROUTES } from './infra-routes.js'
import { openapiDocument } from './openapi.js'
import { bind, type ServerPart } from './part.js'

/** Probes, /runners, /metrics, the OpenAPI document and its docs page: the routes of infra-routes.ts. */
export function infraPart(p: AppParts): ServerPart {
  const { lifecycle, definition, repository, metrics } = p
  const openapi = JSON.stringify(openapiDocument(definition, p.options.version))
  return {
    name: 'infra',
    routes: bind(INFRA_ROUTES, {
      'GET /livez': (c) => c.json({ status: 'live' }),
      'GET /healthz': (c) => c.json({ status: 'live' }),
      'GET /readyz': (c) => {
        const phase = lifecycle.phase
        const waiting = phase === 'ready' ? lifecycle.notReady() : undefined
        if (phase === 'ready' && waiting === undefined) return c.json({ status: 'ready' })
        return c.json({ status: phase === 'ready' ? 'not ready' : phase, reason: waiting ?? lifecycle.reason }, 503)
      },
      // The service's runners, then the models loaded at run time (/v2/repository, bundle serve --models).
      'GET /runners': (c) =>
        c.json(
          [...definition.runners, ...repository.loaded()].map((r) => {
            const batcher = r.stats()
            return { name: r.name, ready: r.ready(), config: r.effectiveConfig(), ...(batcher ? { batcher } : {}) }
          }),
        ),
      'GET /metrics': async (c) =>
        c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }),
      'GET /openapi.json': (c) => c.body(openapi, 200, { 'content-type': 'application/json' }),
      'GET /docs': (c) => c.html(docsPage(definition.name)),
      'GET /docs/assets/:name': (c) => {
        const asset = docsAsset(c.req.param('name')!)
        if (asset === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `no docs asset ${c.req.param('name')}`)
        return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, {
          'content-type': asset.contentType,
          'cache-control': 'public, max-age=86400',
        })
      },
      'GET /': (c) => c.redirect('/docs'),
    }),
  }
}
