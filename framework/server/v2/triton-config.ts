import { BundleError } from '../../../errors/index.js'
import { validateOverrides, type RunnerOverrides } from '../../../runners/index.js'

// A load's `config` as Triton's clients send it (model configuration fields, snake_case, in a
// JSON string: `load_model(name, config=json.dumps({...}))`) or as ours (runner options, as in a
// serve config file) — or both in one object. Triton's fields become runner options; those that
// only describe the model (name, platform, inputs and outputs) are checked where they can be.

const bad = (msg: string) => new BundleError('E_SERVE_CONFIG_INVALID', msg)

/** Triton fields that say nothing a runner could change: accepted as they are. */
const DESCRIPTIVE = ['name', 'platform', 'backend', 'input', 'output', 'version_policy', 'default_model_filename']
const TRITON = ['max_batch_size', 'dynamic_batching', 'instance_group', 'model_warmup', 'parameters', ...DESCRIPTIVE]

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)
const whole = (where: string, v: unknown, min = 0): number => {
  // Triton's JSON carries 64-bit fields as strings ("100") as often as numbers.
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min)
    throw bad(`${where} must be a whole number ≥ ${min}, got ${JSON.stringify(v)}`)
  return n
}

/** The config text of a load request (Triton sends JSON text) as an object. */
export function configObject(name: string, raw: unknown): Record<string, unknown> {
  let v = raw
  if (typeof raw === 'string') {
    try {
      v = JSON.parse(raw)
    } catch (err) {
      throw bad(`the config of '${name}' is not valid JSON (${(err as Error).message})`)
    }
  }
  if (!isMap(v)) throw bad(`the config of '${name}' must be a JSON object`)
  return v
}

/** Runner options from a load config: Triton's model configuration fields and ours, checked. */
export function loadConfig(name: string, raw: unknown): RunnerOverrides {
  const cfg = configObject(name, raw)
  const ours: Record<string, unknown> = {}
  const triton: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(cfg)) (TRITON.includes(k) ? triton : ours)[k] = v
  if (typeof triton.name === 'string' && triton.name !== name)
    throw bad(`the config names model '${triton.name}', but the load is for '${name}'`)
  const fromTriton = tritonOverrides(triton)
  const batching = { ...(fromTriton.batching ?? {}), ...((ours.batching as object | undefined) ?? {}) }
  return validateOverrides(`config of '${name}'`, {
    ...fromTriton,
    ...ours,
    ...(Object.keys(batching).length ? { batching } : {}),
  })
}

function tritonOverrides(t: Record<string, unknown>): Record<string, any> {
  const out: Record<string, any> = {}
  const batching: Record<string, unknown> = {}
  if (t.max_batch_size !== undefined) {
    batching.maxBatchSize = whole('max_batch_size', t.max_batch_size)
    // Triton without a dynamic_batching section runs each request alone (its own rows only).
    if (t.dynamic_batching === undefined) batching.enabled = false
  }
  if (t.dynamic_batching !== undefined) {
    const d = t.dynamic_batching
    if (!isMap(d)) throw bad('dynamic_batching must be an object')
    batching.enabled = true
    if (d.max_queue_delay_microseconds !== undefined)
      batching.maxDelayMs =
        whole('dynamic_batching.max_queue_delay_microseconds', d.max_queue_delay_microseconds) / 1000
    const policy = d.default_queue_policy
    if (policy !== undefined) {
      if (!isMap(policy)) throw bad('dynamic_batching.default_queue_policy must be an object')
      if (policy.default_timeout_microseconds !== undefined) {
        const us = whole('default_queue_policy.default_timeout_microseconds', policy.default_timeout_microseconds)
        if (us > 0) out.deadlineMs = us / 1000
      }
      if (policy.max_queue_size !== undefined) {
        const n = whole('default_queue_policy.max_queue_size', policy.max_queue_size)
        if (n > 0) batching.maxQueueSize = n
      }
    }
  }
  if (Object.keys(batching).length) out.batching = batching
  if (t.instance_group !== undefined) Object.assign(out, instanceGroups(t.instance_group))
  if (t.model_warmup !== undefined) out.warmup = warmupSamples(t.model_warmup)
  return out
}

/** instance_group: workers (the counts added up), on GPUs for KIND_GPU (one device each, or the listed ones). */
function instanceGroups(groups: unknown): Record<string, unknown> {
  if (!Array.isArray(groups) || groups.length === 0) throw bad('instance_group must be a non-empty list')
  let workers = 0
  const gpus: number[] = []
  let kind: string | undefined
  for (const [i, g] of groups.entries()) {
    if (!isMap(g)) throw bad(`instance_group[${i}] must be an object`)
    const k = (g.kind as string | undefined) ?? 'KIND_AUTO'
    if (!['KIND_CPU', 'KIND_GPU', 'KIND_AUTO'].includes(k))
      throw bad(`instance_group[${i}].kind ${JSON.stringify(g.kind)} is not served here (use KIND_CPU or KIND_GPU)`)
    const resolved = k === 'KIND_GPU' ? 'gpu' : 'cpu'
    if (kind !== undefined && kind !== resolved) throw bad('instance_group mixes CPU and GPU groups; use one kind')
    kind = resolved
    workers += g.count === undefined ? 1 : whole(`instance_group[${i}].count`, g.count, 1)
    if (Array.isArray(g.gpus)) gpus.push(...g.gpus.map((d, j) => whole(`instance_group[${i}].gpus[${j}]`, d)))
  }
  if (kind !== 'gpu') return { workers }
  return { workers, resources: { gpu: gpus.length ? gpus : 1 } }
}

const TYPES: Record<string, string> = {
  TYPE_BOOL: 'bool',
  TYPE_UINT8: 'uint8',
  TYPE_UINT16: 'uint16',
  TYPE_UINT32: 'uint32',
  TYPE_UINT64: 'uint64',
  TYPE_INT8: 'int8',
  TYPE_INT16: 'int16',
  TYPE_INT32: 'int32',
  TYPE_INT64: 'int64',
  TYPE_FP16: 'float16',
  TYPE_FP32: 'float32',
  TYPE_FP64: 'float64',
  TYPE_STRING: 'string',
}

/** model_warmup entries as warm-up samples (input_data_file: a path, read as raw bytes). */
function warmupSamples(list: unknown): Record<string, unknown> {
  if (!Array.isArray(list)) throw bad('model_warmup must be a list')
  return {
    samples: list.map((w, i) => {
      if (!isMap(w) || !isMap(w.inputs)) throw bad(`model_warmup[${i}] needs inputs`)
      const inputs = Object.fromEntries(
        Object.entries(w.inputs).map(([name, raw]) => {
          if (!isMap(raw)) throw bad(`model_warmup[${i}].inputs.${name} must be an object`)
          const dtype = raw.data_type === undefined ? undefined : TYPES[raw.data_type as string]
          if (raw.data_type !== undefined && dtype === undefined)
            throw bad(`model_warmup[${i}].inputs.${name}.data_type ${JSON.stringify(raw.data_type)} is not served here`)
          const dims = Array.isArray(raw.dims) ? raw.dims.map((d, j) => whole(`…inputs.${name}.dims[${j}]`, d)) : []
          return [
            name,
            {
              dims,
              ...(dtype ? { dtype } : {}),
              ...(raw.random_data === true ? { randomData: true } : {}),
              ...(typeof raw.input_data_file === 'string' ? { inputDataFile: raw.input_data_file } : {}),
            },
          ]
        }),
      )
      return {
        ...(typeof w.name === 'string' ? { name: w.name } : {}),
        ...(w.batch_size !== undefined ? { batchSize: whole(`model_warmup[${i}].batch_size`, w.batch_size, 1) } : {}),
        ...(w.count !== undefined && Number(w.count) > 0
          ? { count: whole(`model_warmup[${i}].count`, w.count, 1) }
          : {}),
        inputs,
      }
    }),
  }
}
