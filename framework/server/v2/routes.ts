import type { Context, Hono } from 'hono'
import type { Logger } from 'pino'
import { randomUUID } from 'node:crypto'
import { BundleError } from '../../../errors/index.js'
import { withCallContext, type InferenceModel, type RunnerTensor, type TensorSpec } from '../../../runners/index.js'
import { readBody } from '../body.js'
import { clientFacing, errorHeaders } from '../error-response.js'
import { encodeInferResponse, parseInferRequest, protocolType, type InferInput } from './codec.js'
import { decodeBody, encodeBody, pickEncoding } from './encoding.js'
import type { LoadRequest, ModelRepository } from './repository.js'

export interface V2Options {
  /** The models served now and the repository extension's load/unload. */
  repository: ModelRepository
  /** Server readiness: started, not draining, every runner ready. */
  ready: () => boolean
  maxBodyBytes: number
  version: string
  log: Logger
  /** Counts a request in flight (graceful shutdown waits for it). */
  track: <T>(fn: () => Promise<T>) => Promise<T>
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

/** Model metadata; `versions` lists every version loaded now (several after a load with keep). */
const metadata = (m: InferenceModel, versions: string[]) => {
  const spec = (t: TensorSpec) => ({ name: t.name, datatype: protocolType(t.dtype), shape: t.shape })
  return {
    name: m.name,
    versions: versions.length ? versions : [m.version],
    platform: m.platform,
    inputs: m.inputs().map(spec),
    outputs: m.outputs().map(spec),
  }
}

/** Triton's model configuration: the runner's settings plus inputs and outputs (dims without the batch dimension). */
const config = (m: InferenceModel) => {
  const io = (t: TensorSpec) => ({
    name: t.name,
    data_type: `TYPE_${protocolType(t.dtype) === 'BYTES' ? 'STRING' : protocolType(t.dtype)}`,
    dims: t.shape.slice(1),
  })
  return { ...m.config(), input: m.inputs().map(io), output: m.outputs().map(io) }
}

const stats = (m: InferenceModel) => ({
  name: m.name,
  version: m.version,
  last_inference: m.stats.lastInference,
  inference_count: m.stats.inferenceCount,
  execution_count: m.stats.executionCount,
  inference_stats: {
    success: { ...m.stats.success },
    fail: { ...m.stats.fail },
    queue: { ...m.stats.queue },
    compute_infer: { ...m.stats.computeInfer },
  },
  batch_stats: m.stats.batchStats(),
  // Ensembles add one entry per step (an extension field; standard clients ignore it).
  ...(m.stepStats ? { step_stats: m.stepStats() } : {}),
})

function parseJson(text: string): Record<string, unknown> {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    throw new BundleError('E_INPUT_INVALID', 'the request body is not JSON')
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new BundleError('E_INPUT_INVALID', 'the request body must be a JSON object')
  return v as Record<string, unknown>
}

/**
 * A load request body: `{ "parameters": { "version": "2.0.0", "config": {…} or "{…}", "keep": true } }`
 * (Triton sends config as a JSON string). An empty body loads the newest version.
 */
function loadRequest(text: string): LoadRequest {
  if (!text.trim()) return {}
  const p = parseJson(text).parameters
  if (p === undefined) return {}
  if (p === null || typeof p !== 'object') throw new BundleError('E_INPUT_INVALID', '"parameters" must be an object')
  const { version, config, keep } = p as Record<string, unknown>
  if (version !== undefined && typeof version !== 'string')
    throw new BundleError('E_INPUT_INVALID', 'parameters.version must be a string')
  const cfg = typeof config === 'string' ? parseJson(config) : config
  if (cfg !== undefined && (cfg === null || typeof cfg !== 'object'))
    throw new BundleError('E_INPUT_INVALID', 'parameters.config must be an object (or its JSON text)')
  return {
    ...(version ? { version } : {}),
    ...(cfg ? { config: cfg as LoadRequest['config'] } : {}),
    ...(keep === true ? { keep: true } : {}),
  }
}

/** Checks inputs against what the model declares; messages name the input, what was expected and what came. */
function check(m: InferenceModel, inputs: InferInput[]): void {
  const declared = m.inputs()
  for (const input of inputs) {
    const d = declared.find((x) => x.name === input.name)
    if (d === undefined)
      throw new BundleError(
        'E_INPUT_INVALID',
        `unexpected input "${input.name}"; ${m.name} takes ${declared.map((x) => `"${x.name}"`).join(', ')}`,
      )
    if (protocolType(d.dtype) !== input.datatype)
      throw new BundleError(
        'E_INPUT_INVALID',
        `input "${input.name}": expected datatype ${protocolType(d.dtype)}, got ${input.datatype}`,
      )
    const fits = d.shape.length === input.shape.length && d.shape.every((n, i) => n < 0 || n === input.shape[i])
    if (!fits)
      throw new BundleError(
        'E_INPUT_INVALID',
        `input "${input.name}": expected shape [${d.shape.join(',')}] (-1 = any), got [${input.shape.join(',')}]`,
      )
  }
  const missing = declared.filter((d) => !inputs.some((i) => i.name === d.name))
  if (missing.length)
    throw new BundleError('E_INPUT_INVALID', `missing input ${missing.map((x) => `"${x.name}"`).join(', ')}`)
  const rows = inputs[0]!.shape[0] ?? 1
  if (rows > m.maxBatchSize())
    throw new BundleError(
      'E_INPUT_INVALID',
      `batch of ${rows} is larger than ${m.name}'s max_batch_size ${m.maxBatchSize()}`,
    )
}

/**
 * The Open Inference Protocol (KServe v2 / Triton HTTP) next to the service's own API: server
 * and model metadata, health, model configuration and statistics, and inference in JSON or
 * with binary tensor data — through the same runners and batchers as the service's APIs.
 * The API key is checked before these routes by the app (auth.ts): health and model metadata
 * are open, inference and the repository extension need the key.
 */
export function mountV2(app: Hono<any>, o: V2Options): void {
  const find = (c: Context): InferenceModel => o.repository.find(c.req.param('model')!, c.req.param('version'))
  const route = (handler: (c: Context) => Response | Promise<Response>) => async (c: Context) => {
    try {
      return await handler(c)
    } catch (err) {
      return v2Error(c, err, o.log)
    }
  }

  app.get(
    '/v2',
    route((c) => c.json({ name: 'modelbundle', version: o.version, extensions: EXTENSIONS })),
  )
  app.get('/v2/health/live', (c) => c.body(null, 200))
  app.get('/v2/health/ready', (c) => c.body(null, o.ready() ? 200 : 503))
  app.get(
    '/v2/models/stats',
    route((c) => c.json({ model_stats: o.repository.models().map(stats) })),
  )
  // The model repository extension: what the store holds and its state here; load and unload at run time.
  app.post(
    '/v2/repository/index',
    route((c) => c.json(o.repository.index())),
  )
  app.post(
    '/v2/repository/models/:model/load',
    route(async (c) => {
      const m = await o.repository.load(c.req.param('model')!, loadRequest(await smallBody(c, o.maxBodyBytes)))
      return c.json({ name: m.name, version: m.version })
    }),
  )
  app.post(
    '/v2/repository/models/:model/unload',
    route(async (c) => {
      const body = await smallBody(c, o.maxBodyBytes)
      const params = body.trim() ? (parseJson(body).parameters as Record<string, unknown> | undefined) : undefined
      await o.repository.unload(c.req.param('model')!, typeof params?.version === 'string' ? params.version : undefined)
      return c.json({})
    }),
  )
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.get(
      base,
      route((c) => c.json(metadata(find(c), o.repository.versions(c.req.param('model')!)))),
    )
    app.get(
      `${base}/ready`,
      route((c) => c.body(null, find(c).ready() ? 200 : 400)),
    )
    app.get(
      `${base}/config`,
      route((c) => c.json(config(find(c)))),
    )
    app.get(
      `${base}/stats`,
      route((c) => c.json({ model_stats: [stats(find(c))] })),
    )
    app.post(
      `${base}/infer`,
      route(async (c) => {
        const arrived = performance.now()
        const m = find(c)
        if (!o.ready() || !m.ready()) throw new BundleError('E_HTTP_NOT_READY', `model "${m.name}" is not ready`)
        return o.track(async () => {
          const headers = c.req.raw.headers
          const raw = await readBody(
            headers.get('content-length') ?? undefined,
            () => c.req.arrayBuffer(),
            () => c.req.raw.body,
            o.maxBodyBytes,
          )
          const body = await decodeBody(raw, headers.get('content-encoding') ?? undefined, o.maxBodyBytes)
          const req = parseInferRequest(body, headers.get('inference-header-content-length') ?? undefined)
          check(m, req.inputs)
          const known = m.outputs().map((x) => x.name)
          for (const r of req.outputs ?? [])
            if (!known.includes(r.name))
              throw new BundleError(
                'E_INPUT_INVALID',
                `unknown output "${r.name}"; ${m.name} has ${known.map((x) => `"${x}"`).join(', ')}`,
              )
          // Resolved again now, after the body arrived: a swap meanwhile sends it to the new version.
          const target = c.req.param('version') === undefined ? find(c) : m
          // The client's timeout and priority reach the model's batcher as the request's own.
          const call = {
            ...(req.timeoutMs !== undefined ? { deadline: arrived + req.timeoutMs } : {}),
            ...(req.priority !== undefined ? { priority: req.priority } : {}),
          }
          const result = await withCallContext(call, () =>
            target.infer(Object.fromEntries(req.inputs.map((i) => [i.name, i.tensor]))),
          )
          const wanted = req.outputs ?? known.map((name) => ({ name, binary: undefined }))
          const outputs = wanted.map((w) => ({
            name: w.name,
            tensor: result[w.name] as RunnerTensor,
            binary: w.binary ?? req.binaryOutput,
          }))
          const { body: out, headers: h } = encodeInferResponse(target, req.id, outputs)
          const enc = pickEncoding(headers.get('accept-encoding') ?? undefined)
          if (enc === undefined) return c.body(out as never, 200, h)
          // Inference-Header-Content-Length still counts the uncompressed JSON, as clients expect.
          return c.body((await encodeBody(out, enc)) as never, 200, {
            ...h,
            'content-encoding': enc,
            vary: 'accept-encoding',
          })
        })
      }),
    )
  }
}
