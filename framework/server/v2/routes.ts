import type { Context, Hono } from 'hono'
import type { Logger } from 'pino'
import { BundleError, isBundleError } from '../../../errors/index.js'
import type { InferenceModel, RunnerTensor, TensorSpec } from '../../../runners/index.js'
import { readBody } from '../body.js'
import { encodeInferResponse, parseInferRequest, protocolType, type InferInput } from './codec.js'

export interface V2Options {
  /** The models served now (runners that have started). */
  models: () => InferenceModel[]
  /** Server readiness: started, not draining, every runner ready. */
  ready: () => boolean
  /** Throws E_HTTP_UNAUTHORIZED when an API key is required and missing or wrong. */
  authorize: (c: Context) => void
  maxBodyBytes: number
  version: string
  log: Logger
  /** Counts a request in flight (graceful shutdown waits for it). */
  track: <T>(fn: () => Promise<T>) => Promise<T>
}

const EXTENSIONS = ['binary_tensor_data', 'model_configuration', 'statistics']

/** Errors as the protocol has them: `{ "error": "..." }` with the status of the error's code. */
function fail(c: Context, err: unknown, log: Logger): Response {
  if (isBundleError(err)) {
    // 5xx from our catalog carry messages written for clients; anything else stays in the log.
    return c.json({ error: err.message }, err.status as 400)
  }
  log.error({ err }, 'inference failed')
  return c.json({ error: 'internal error; the server log has the details' }, 500)
}

const metadata = (m: InferenceModel) => {
  const spec = (t: TensorSpec) => ({ name: t.name, datatype: protocolType(t.dtype), shape: t.shape })
  return { name: m.name, versions: [m.version], platform: m.platform, inputs: m.inputs().map(spec), outputs: m.outputs().map(spec) }
}

/** Triton's model configuration: the runner's settings plus inputs and outputs (dims without the batch dimension). */
const config = (m: InferenceModel) => {
  const io = (t: TensorSpec) => ({ name: t.name, data_type: `TYPE_${protocolType(t.dtype) === 'BYTES' ? 'STRING' : protocolType(t.dtype)}`, dims: t.shape.slice(1) })
  return { ...m.config(), input: m.inputs().map(io), output: m.outputs().map(io) }
}

const stats = (m: InferenceModel) => ({
  name: m.name,
  version: m.version,
  last_inference: m.stats.lastInference,
  inference_count: m.stats.inferenceCount,
  execution_count: m.stats.executionCount,
  inference_stats: { success: { ...m.stats.success }, fail: { ...m.stats.fail }, queue: { ...m.stats.queue }, compute_infer: { ...m.stats.computeInfer } },
  batch_stats: m.stats.batchStats(),
})

/** Checks inputs against what the model declares; messages name the input, what was expected and what came. */
function check(m: InferenceModel, inputs: InferInput[]): void {
  const declared = m.inputs()
  for (const input of inputs) {
    const d = declared.find((x) => x.name === input.name)
    if (d === undefined) throw new BundleError('E_INPUT_INVALID', `unexpected input "${input.name}"; ${m.name} takes ${declared.map((x) => `"${x.name}"`).join(', ')}`)
    if (protocolType(d.dtype) !== input.datatype) throw new BundleError('E_INPUT_INVALID', `input "${input.name}": expected datatype ${protocolType(d.dtype)}, got ${input.datatype}`)
    const fits = d.shape.length === input.shape.length && d.shape.every((n, i) => n < 0 || n === input.shape[i])
    if (!fits) throw new BundleError('E_INPUT_INVALID', `input "${input.name}": expected shape [${d.shape.join(',')}] (-1 = any), got [${input.shape.join(',')}]`)
  }
  const missing = declared.filter((d) => !inputs.some((i) => i.name === d.name))
  if (missing.length) throw new BundleError('E_INPUT_INVALID', `missing input ${missing.map((x) => `"${x.name}"`).join(', ')}`)
  const rows = inputs[0]!.shape[0] ?? 1
  if (rows > m.maxBatchSize()) throw new BundleError('E_INPUT_INVALID', `batch of ${rows} is larger than ${m.name}'s max_batch_size ${m.maxBatchSize()}`)
}

/**
 * The Open Inference Protocol (KServe v2 / Triton HTTP) next to the service's own API: server
 * and model metadata, health, model configuration and statistics, and inference in JSON or
 * with binary tensor data — through the same runners and batchers as the service's APIs.
 */
export function mountV2(app: Hono<any>, o: V2Options): void {
  const find = (c: Context): InferenceModel => {
    const name = c.req.param('model')
    const version = c.req.param('version')
    const m = o.models().find((x) => x.name === name)
    if (m === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `unknown model "${name}"`)
    if (version !== undefined && version !== m.version) throw new BundleError('E_HTTP_NOT_FOUND', `model "${name}" has no version "${version}" (serving ${m.version})`)
    return m
  }
  const route = (handler: (c: Context) => Response | Promise<Response>) => async (c: Context) => {
    try {
      return await handler(c)
    } catch (err) {
      return fail(c, err, o.log)
    }
  }

  app.get('/v2', route((c) => c.json({ name: 'modelbundle', version: o.version, extensions: EXTENSIONS })))
  app.get('/v2/health/live', (c) => c.body(null, 200))
  app.get('/v2/health/ready', (c) => c.body(null, o.ready() ? 200 : 503))
  app.get('/v2/models/stats', route((c) => c.json({ model_stats: o.models().map(stats) })))
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.get(base, route((c) => c.json(metadata(find(c)))))
    app.get(`${base}/ready`, route((c) => c.body(null, find(c).ready() ? 200 : 400)))
    app.get(`${base}/config`, route((c) => c.json(config(find(c)))))
    app.get(`${base}/stats`, route((c) => c.json({ model_stats: [stats(find(c))] })))
    app.post(
      `${base}/infer`,
      route(async (c) => {
        o.authorize(c)
        const m = find(c)
        if (!o.ready() || !m.ready()) throw new BundleError('E_HTTP_NOT_READY', `model "${m.name}" is not ready`)
        return o.track(async () => {
          const headers = c.req.raw.headers
          const body = await readBody(headers.get('content-length') ?? undefined, () => c.req.arrayBuffer(), () => c.req.raw.body, o.maxBodyBytes)
          const req = parseInferRequest(body, headers.get('inference-header-content-length') ?? undefined)
          check(m, req.inputs)
          const known = m.outputs().map((x) => x.name)
          for (const r of req.outputs ?? []) if (!known.includes(r.name)) throw new BundleError('E_INPUT_INVALID', `unknown output "${r.name}"; ${m.name} has ${known.map((x) => `"${x}"`).join(', ')}`)
          const result = await m.infer(Object.fromEntries(req.inputs.map((i) => [i.name, i.tensor])))
          const wanted = req.outputs ?? known.map((name) => ({ name, binary: undefined }))
          const outputs = wanted.map((w) => ({ name: w.name, tensor: result[w.name] as RunnerTensor, binary: w.binary ?? req.binaryOutput }))
          const { body: out, headers: h } = encodeInferResponse(m, req.id, outputs)
          return c.body(out as never, 200, h)
        })
      }),
    )
  }
}
