import type { Context } from 'hono'
import type { Logger } from 'pino'
import { randomUUID } from 'node:crypto'
import { BundleError } from '../../../errors/index.js'
import type { InferenceModel } from '../../../runners/index.js'
import { readBody } from '../body.js'
import { clientFacing, errorHeaders } from '../error-response.js'
import { encodeInferResponse, parseInferRequest } from './codec.js'
import { decodeBody, encodeBody, pickEncoding } from '../content-encoding.js'
import { bind, type Handler, type ServerPart } from '../part.js'
import { V2_ROUTES } from './route-list.js'
import { runInference } from './infer.js'
import { withServerSpan } from '../request-span.js'
import { config, loadRequest, metadata, parseJson, stats } from './models.js'
import { forStatistics } from './model-errors.js'
import type { ModelRepository } from './repository.js'

export interface V2Options {
  /** The models served now and the repository extension's load/unload. */
  repository: ModelRepository
  /** Server readiness: started, not draining, every runner ready. */
  ready: () => boolean
  maxBodyBytes: number
  version: string
  log: Logger
  /** Counts a request in flight (graceful shutdown waits for it); `lone` runs first when it is the only one. */
  track: <T>(fn: () => Promise<T>, lone?: () => void) => Promise<T>
}

const EXTENSIONS = ['binary_tensor_data', 'model_configuration', 'model_repository', 'statistics']

/**
 * Errors as the protocol has them: `{ "error": "..." }` with the status of the error's code.
 * What a client sees is decided as for every other route (no paths, no internals in a 5xx).
 */
export function v2Error(c: Context, err: unknown, log: Logger): Response {
  const e = clientFacing(err, (c.get('requestId') as string | undefined) ?? randomUUID(), log)
  return c.json({ error: e.message }, e.status as 400, errorHeaders(e.code))
}

/** A small JSON body (repository requests), capped at the body limit like every other body. */
async function smallBody(c: Context, max: number): Promise<string> {
  const bytes = await readBody(
    c.req.header('content-length'),
    () => c.req.arrayBuffer(),
    () => c.req.raw.body,
    max,
  )
  return new TextDecoder().decode(bytes)
}

/**
 * The Open Inference Protocol (KServe v2 / Triton HTTP) next to the service's own API: server
 * and model metadata, health, model configuration and statistics, and inference in JSON or
 * with binary tensor data — through the same runners and batchers as the service's APIs.
 * The routes, and which need the API key (the app checks it before them), are route-list.ts's.
 */
export function v2Part(o: V2Options): ServerPart {
  const v2 = new V2Routes(o)
  const models = ['/v2/models/:model', '/v2/models/:model/versions/:version'].map((base) => v2.model(base))
  return {
    name: 'v2',
    routes: bind(V2_ROUTES, Object.assign(v2.server(), v2.repository(), ...models)),
    answer: (c, err, headers) => {
      const res = v2Error(c, err, o.log)
      for (const [name, value] of Object.entries(headers)) res.headers.set(name, value)
      return res
    },
  }
}

type Handlers = Record<string, Handler>

/** The /v2 routes, in groups: the server's, the repository extension's, and each model's. */
class V2Routes {
  constructor(private readonly o: V2Options) {}

  private find(c: Context): InferenceModel {
    return this.o.repository.find(c.req.param('model')!, c.req.param('version'))
  }

  /** Errors answered in the protocol's own shape. */
  private route(handler: (c: Context) => Response | Promise<Response>): Handler {
    return async (c: Context) => {
      try {
        return await handler(c)
      } catch (err) {
        return v2Error(c, err, this.o.log)
      }
    }
  }

  /** Server metadata, health, and every model's statistics. */
  server(): Handlers {
    const o = this.o
    return {
      'GET /v2': this.route((c) => c.json({ name: 'modelbundle', version: o.version, extensions: EXTENSIONS })),
      'GET /v2/health/live': (c) => c.body(null, 200),
      'GET /v2/health/ready': (c) => c.body(null, o.ready() ? 200 : 503),
      'GET /v2/models/stats': this.route((c) => c.json({ model_stats: o.repository.models().map(stats) })),
    }
  }

  /** The model repository extension: what the store holds and its state here; load and unload at run time. */
  repository(): Handlers {
    const o = this.o
    return {
      'POST /v2/repository/index': this.route((c) => c.json(o.repository.index())),
      'POST /v2/repository/models/:model/load': this.route(async (c) => {
        const m = await o.repository.load(c.req.param('model')!, loadRequest(await smallBody(c, o.maxBodyBytes)))
        return c.json({ name: m.name, version: m.version })
      }),
      'POST /v2/repository/models/:model/unload': this.route(async (c) => {
        const body = await smallBody(c, o.maxBodyBytes)
        const params = body.trim() ? (parseJson(body).parameters as Record<string, unknown> | undefined) : undefined
        const version = typeof params?.version === 'string' ? params.version : undefined
        await o.repository.unload(c.req.param('model')!, version)
        return c.json({})
      }),
    }
  }

  /** One model's metadata, readiness, configuration, statistics and inference, at `base`. */
  model(base: string): Handlers {
    const o = this.o
    return {
      [`GET ${base}`]: this.route((c) => c.json(metadata(this.find(c), o.repository.versions(c.req.param('model')!)))),
      // Triton's answer: 200 ready, 400 known but not ready (not loaded, loading), 404 unknown.
      [`GET ${base}/ready`]: this.route((c) =>
        c.body(null, o.repository.isReady(c.req.param('model')!, c.req.param('version')) ? 200 : 400),
      ),
      [`GET ${base}/config`]: this.route((c) => c.json(config(this.find(c)))),
      [`GET ${base}/stats`]: this.route((c) =>
        c.json({ model_stats: [forStatistics(c.req.param('model')!, () => stats(this.find(c)))] }),
      ),
      [`POST ${base}/infer`]: this.route((c) => this.traced(c, base)),
    }
  }

  /** An inference request in its server span (the access-log line names the trace, as an API route's does). */
  private traced(c: Context, base: string): Promise<Response> {
    const arrived = performance.now()
    const m = this.find(c)
    if (!this.o.ready() || !m.ready()) throw new BundleError('E_HTTP_NOT_READY', `model "${m.name}" is not ready`)
    const headers = c.req.raw.headers
    return this.o.track(
      () =>
        withServerSpan(
          () => ({
            name: `POST ${base}/infer`,
            attributes: {
              'http.request.method': 'POST',
              'http.route': `${base}/infer`,
              'url.path': c.req.path,
              'bundle.model': m.name,
            },
          }),
          (name) => headers.get(name) ?? undefined,
          () => this.infer(c, m, headers, arrived),
          { statusOf: (res) => res.status, started: (rs) => c.set('trace', rs.ids()) },
        ),
      () => m.expectCall?.(),
    )
  }

  /** One /v2 inference request, from its body to the answer. */
  private async infer(c: Context, m: InferenceModel, headers: Headers, arrived: number): Promise<Response> {
    const o = this.o
    const raw = await readBody(
      headers.get('content-length') ?? undefined,
      () => c.req.arrayBuffer(),
      () => c.req.raw.body,
      o.maxBodyBytes,
    )
    const body = await decodeBody(raw, headers.get('content-encoding') ?? undefined, o.maxBodyBytes)
    const req = parseInferRequest(body, headers.get('inference-header-content-length') ?? undefined)
    const { model: target, outputs: results } = await runInference(req, {
      model: m,
      resolve: () => this.find(c),
      versioned: c.req.param('version') !== undefined,
      arrived,
    })
    const outputs = results.map((r) => ({ ...r, binary: r.binary ?? req.binaryOutput }))
    const { body: out, headers: h } = encodeInferResponse(target, req.id, outputs)
    const enc = pickEncoding(headers.get('accept-encoding') ?? undefined)
    if (enc === undefined) return c.body(out as never, 200, h)
    // Inference-Header-Content-Length still counts the uncompressed JSON, as clients expect.
    return c.body((await encodeBody(out, enc)) as never, 200, {
      ...h,
      'content-encoding': enc,
      vary: 'accept-encoding',
    })
  }
}
