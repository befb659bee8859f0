import { BundleError } from '../../../errors/index.js'
import type { InferenceModel, TensorSpec } from '../../../runners/index.js'
import { protocolType, type InferInput } from './codec.js'
import type { LoadRequest } from './repository.js'

// What the Open Inference Protocol says about models, the same over HTTP (routes.ts) and gRPC
// (../grpc/): metadata, configuration, statistics, load parameters and the input checks.

/** Model metadata; `versions` lists every version loaded now (several after a load with keep). */
export const metadata = (m: InferenceModel, versions: string[]) => {
  const spec = (t: TensorSpec) => ({ name: t.name, datatype: protocolType(t.dtype), shape: t.shape })
  return {
    name: m.name,
    versions: versions.length ? versions : [m.version],
    platform: m.platform,
    inputs: m.inputs().map(spec),
    outputs: m.outputs().map(spec),
  }
}

/**
 * Triton's model configuration: the runner's settings plus inputs and outputs — their dims
 * without the batch dimension when the model batches (max_batch_size > 0), whole when not.
 */
export const config = (m: InferenceModel) => {
  const batched = m.maxBatchSize() > 0
  const io = (t: TensorSpec) => ({
    name: t.name,
    data_type: `TYPE_${protocolType(t.dtype) === 'BYTES' ? 'STRING' : protocolType(t.dtype)}`,
    dims: batched ? t.shape.slice(1) : t.shape,
  })
  return { ...m.config(), input: m.inputs().map(io), output: m.outputs().map(io) }
}

export const stats = (m: InferenceModel) => ({
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

export function parseJson(text: string): Record<string, unknown> {
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
 * A load request's parameters: `version` ("2.0.0"), `config` (runner settings or Triton's model
 * configuration fields, an object or its JSON text, as Triton sends it) and `keep` (load next to
 * the versions loaded now). Triton's clients also send `unload_dependents` and `file:…` entries:
 * the former is accepted (a model here has no dependents), files are refused.
 */
export function loadParameters(p: Record<string, unknown>): LoadRequest {
  const { version, config, keep } = p
  const file = Object.keys(p).find((k) => k.startsWith('file:'))
  if (file !== undefined)
    throw new BundleError(
      'E_INPUT_INVALID',
      `parameters.${file}: model files are not taken in a load request; save the model in the store ` +
        '(bundle models save FILE --name NAME) and load it by name',
    )
  if (version !== undefined && typeof version !== 'string')
    throw new BundleError('E_INPUT_INVALID', 'parameters.version must be a string')
  if (keep !== undefined && typeof keep !== 'boolean')
    throw new BundleError('E_INPUT_INVALID', 'parameters.keep must be true or false')
  // The config (an object, or its JSON text as Triton's clients send it) is read by the load
  // itself: a malformed one fails it as "failed to load 'x': …".
  return {
    ...(version ? { version } : {}),
    ...(config !== undefined && config !== '' ? { config } : {}),
    ...(keep === true ? { keep: true } : {}),
  }
}

/** A load request body: `{ "parameters": { … } }` (see loadParameters). An empty body loads the newest version. */
export function loadRequest(text: string): LoadRequest {
  if (!text.trim()) return {}
  const p = parseJson(text).parameters
  if (p === undefined) return {}
  if (p === null || typeof p !== 'object') throw new BundleError('E_INPUT_INVALID', '"parameters" must be an object')
  return loadParameters(p as Record<string, unknown>)
}

/**
 * Checks inputs against what the model declares, in the order a client fixes them: names (unknown,
 * then missing), then each input's datatype, rank and dimensions. Values are decoded only after
 * (InferInput.decode), so a wrong name or rank is never reported as a wrong value count.
 */
export function check(m: InferenceModel, inputs: InferInput[]): void {
  const declared = m.inputs()
  const names = declared.map((x) => `"${x.name}"`).join(', ') || 'none'
  const unknown = inputs.find((i) => !declared.some((d) => d.name === i.name))
  if (unknown !== undefined)
    throw new BundleError('E_INPUT_INVALID', `model "${m.name}" has no input "${unknown.name}" (its inputs: ${names})`)
  const missing = declared.filter((d) => !inputs.some((i) => i.name === d.name))
  if (missing.length)
    throw new BundleError(
      'E_INPUT_INVALID',
      `missing input ${missing.map((x) => `"${x.name}"`).join(', ')} (model "${m.name}" takes ${names})`,
    )
  for (const input of inputs) {
    const d = declared.find((x) => x.name === input.name)!
    if (protocolType(d.dtype) !== input.datatype)
      throw new BundleError(
        'E_INPUT_INVALID',
        `input "${input.name}": expected datatype ${protocolType(d.dtype)}, got ${input.datatype}`,
      )
    const want = `[${d.shape.join(',')}]`
    if (d.shape.length !== input.shape.length)
      throw new BundleError(
        'E_INPUT_INVALID',
        `input "${input.name}": expected rank ${d.shape.length} (shape ${want}, -1 = any), got rank ` +
          `${input.shape.length} (shape [${input.shape.join(',')}])`,
      )
    if (!d.shape.every((n, i) => n < 0 || n === input.shape[i]))
      throw new BundleError(
        'E_INPUT_INVALID',
        `input "${input.name}": expected shape ${want} (-1 = any), got [${input.shape.join(',')}]`,
      )
  }
  // A model that runs requests as given takes any shape its inputs declare (checked above).
  const rows = inputs[0]?.shape[0] ?? 1
  if (m.maxBatchSize() > 0 && rows > m.maxBatchSize())
    throw new BundleError(
      'E_INPUT_INVALID',
      `batch of ${rows} is larger than ${m.name}'s max_batch_size ${m.maxBatchSize()}`,
    )
}
