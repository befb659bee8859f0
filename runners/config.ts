import { BundleError } from '../errors/index.js'
import type { GpuRequest } from './gpu/placement.js'
import type { BatchingOptions, WarmupOptions } from './onnx/options.js'
import { validateWarmup } from './onnx/warmup-config.js'

/** Every runner option an operator may override without touching code. */
export interface RunnerOverrides {
  workers?: number
  /** Where workers run: 'process' (default, crash isolation) or 'thread' (in the API process). */
  isolation?: 'process' | 'thread'
  minWorkers?: number
  maxWorkers?: number
  timeoutMs?: number
  deadlineMs?: number
  batchesPerWorker?: number
  idleUnloadMs?: number
  intraOpThreads?: number
  executionProviders?: string[]
  /** maxLatencyMs: the deadline's old name (deadlineMs wins when both are given). */
  batching?: BatchingOptions
  resources?: { cpu?: number; gpu?: GpuRequest }
  warmup?: false | WarmupOptions
}

const bad = (msg: string) => new BundleError('E_SERVE_CONFIG_INVALID', msg)

const positiveInt = (where: string, v: unknown): number => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw bad(`${where} must be a positive integer, got ${JSON.stringify(v)}`)
  return v
}
const atLeastZero = (where: string, v: unknown): number => {
  if (typeof v !== 'number' || !(v >= 0) || !Number.isFinite(v))
    throw bad(`${where} must be a number of milliseconds, 0 or more, got ${JSON.stringify(v)}`)
  return v
}
const positive = (where: string, v: unknown): number => {
  if (typeof v !== 'number' || !(v > 0)) throw bad(`${where} must be a positive number, got ${JSON.stringify(v)}`)
  return v
}

function only(where: string, obj: Record<string, unknown>, keys: readonly string[]): void {
  for (const k of Object.keys(obj))
    if (!keys.includes(k)) throw bad(`${where}: unknown key "${k}" (known: ${keys.join(', ')})`)
}

/** A runner's `batching:` overrides. */
function validateBatching(where: string, raw: unknown): NonNullable<RunnerOverrides['batching']> {
  const b = raw as Record<string, unknown>
  if (b === null || typeof b !== 'object') throw bad(`${where} must be a mapping`)
  only(where, b, ['enabled', 'maxBatchSize', 'maxDelayMs', 'maxQueueSize', 'maxLatencyMs', 'batchDim'])
  const out: NonNullable<RunnerOverrides['batching']> = {}
  if (b.enabled !== undefined) {
    if (typeof b.enabled !== 'boolean') throw bad(`${where}.enabled must be true or false`)
    out.enabled = b.enabled
  }
  // 0: never merge requests (Triton's max_batch_size 0), each runs as given.
  if (b.maxBatchSize !== undefined)
    out.maxBatchSize = b.maxBatchSize === 0 ? 0 : positiveInt(`${where}.maxBatchSize (or 0)`, b.maxBatchSize)
  if (b.maxDelayMs !== undefined) out.maxDelayMs = atLeastZero(`${where}.maxDelayMs`, b.maxDelayMs)
  if (b.maxQueueSize !== undefined) out.maxQueueSize = positiveInt(`${where}.maxQueueSize`, b.maxQueueSize)
  if (b.maxLatencyMs !== undefined) out.maxLatencyMs = positive(`${where}.maxLatencyMs`, b.maxLatencyMs)
  if (b.batchDim !== undefined) {
    const dim = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
    if (dim(b.batchDim)) out.batchDim = b.batchDim as number
    else if (Array.isArray(b.batchDim) && b.batchDim.length === 2 && b.batchDim.every(dim))
      out.batchDim = b.batchDim as [number, number]
    else
      throw bad(
        `${where}.batchDim must be a dimension index (0, 1, …) or [input dimension, output dimension], ` +
          `got ${JSON.stringify(b.batchDim)}`,
      )
  }
  return out
}

/** A runner's `resources:` overrides (CPU cores per worker, GPUs). */
function validateResources(where: string, raw: unknown): NonNullable<RunnerOverrides['resources']> {
  const r = raw as Record<string, unknown>
  if (r === null || typeof r !== 'object') throw bad(`${where} must be a mapping`)
  only(where, r, ['cpu', 'gpu'])
  const out: NonNullable<RunnerOverrides['resources']> = {}
  if (r.cpu !== undefined) out.cpu = positive(`${where}.cpu`, r.cpu)
  if (r.gpu !== undefined) {
    if (
      !(typeof r.gpu === 'number' && r.gpu >= 0) &&
      !(Array.isArray(r.gpu) && r.gpu.every((d) => typeof d === 'number' || typeof d === 'string'))
    )
      throw bad(`${where}.gpu must be a number or a device list`)
    out.gpu = r.gpu as GpuRequest
  }
  return out
}

/** Validates one runner's overrides (from YAML or env); unknown keys are errors that name the key. */
export function validateOverrides(where: string, raw: unknown): RunnerOverrides {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw bad(`${where} must be a mapping of runner options`)
  const o = raw as Record<string, unknown>
  only(where, o, [
    'workers',
    'isolation',
    'minWorkers',
    'maxWorkers',
    'timeoutMs',
    'deadlineMs',
    'batchesPerWorker',
    'idleUnloadMs',
    'intraOpThreads',
    'executionProviders',
    'batching',
    'resources',
    'warmup',
  ])
  const out: RunnerOverrides = {}
  if (o.workers !== undefined) out.workers = positiveInt(`${where}.workers`, o.workers)
  if (o.isolation !== undefined) {
    if (o.isolation !== 'process' && o.isolation !== 'thread')
      throw bad(`${where}.isolation must be process or thread, got ${JSON.stringify(o.isolation)}`)
    out.isolation = o.isolation
  }
  if (o.minWorkers !== undefined) out.minWorkers = positiveInt(`${where}.minWorkers`, o.minWorkers)
  if (o.maxWorkers !== undefined) out.maxWorkers = positiveInt(`${where}.maxWorkers`, o.maxWorkers)
  if (out.minWorkers !== undefined && out.maxWorkers !== undefined && out.minWorkers > out.maxWorkers)
    throw bad(`${where}: minWorkers ${out.minWorkers} is above maxWorkers ${out.maxWorkers}`)
  if (o.timeoutMs !== undefined) out.timeoutMs = positive(`${where}.timeoutMs`, o.timeoutMs)
  if (o.deadlineMs !== undefined) out.deadlineMs = positive(`${where}.deadlineMs`, o.deadlineMs)
  if (o.batchesPerWorker !== undefined)
    out.batchesPerWorker = positiveInt(`${where}.batchesPerWorker`, o.batchesPerWorker)
  if (o.idleUnloadMs !== undefined) out.idleUnloadMs = positive(`${where}.idleUnloadMs`, o.idleUnloadMs)
  if (o.intraOpThreads !== undefined) out.intraOpThreads = positiveInt(`${where}.intraOpThreads`, o.intraOpThreads)
  if (o.executionProviders !== undefined) {
    if (!Array.isArray(o.executionProviders) || o.executionProviders.some((p) => typeof p !== 'string'))
      throw bad(`${where}.executionProviders must be a list of names, e.g. [cuda, cpu]`)
    out.executionProviders = o.executionProviders as string[]
  }
  if (o.batching !== undefined) out.batching = validateBatching(`${where}.batching`, o.batching)
  if (o.resources !== undefined) out.resources = validateResources(`${where}.resources`, o.resources)
  if (o.warmup !== undefined) out.warmup = validateWarmup(`${where}.warmup`, o.warmup, bad)
  return out
}

/** The `runners:` section of a serve config file, keyed by runner name. */
export function parseServeConfig(doc: unknown, file: string): Record<string, RunnerOverrides> {
  if (doc === null || doc === undefined) return {}
  if (typeof doc !== 'object' || Array.isArray(doc)) throw bad(`${file} must be a mapping with a "runners" key`)
  // `models:` (the memory budget) is read by memorySettings (runners/memory/settings.ts), `trust:`
  // (public keys every model must be signed by) by the CLI.
  only(file, doc as Record<string, unknown>, ['runners', 'models', 'trust'])
  const runners = (doc as { runners?: unknown }).runners ?? {}
  if (typeof runners !== 'object' || runners === null || Array.isArray(runners))
    throw bad(`${file}: runners must be a mapping of runner name → options`)
  return Object.fromEntries(
    Object.entries(runners).map(([name, o]) => [name, validateOverrides(`${file}: runners.${name}`, o)]),
  )
}

const envName = (runner: string) => runner.toUpperCase().replace(/[^A-Z0-9]/g, '_')

/**
 * Overrides from the environment: BUNDLE_RUNNER_<NAME>_<OPTION>, the name upper-cased with
 * other characters as "_" (ocr-cls → OCR_CLS). Options: WORKERS, MIN_WORKERS, MAX_WORKERS, TIMEOUT_MS, DEADLINE_MS,
 * BATCHES_PER_WORKER, IDLE_UNLOAD_MS, INTRA_OP_THREADS, EXECUTION_PROVIDERS (comma-separated),
 * BATCHING_ENABLED, BATCHING_MAX_BATCH_SIZE, BATCHING_MAX_DELAY_MS, BATCHING_MAX_QUEUE_SIZE,
 * BATCHING_MAX_LATENCY_MS (the deadline's old name), BATCHING_BATCH_DIM (a number, or "input,output"), CPU, GPU (a
 * number or a comma-separated device list), WARMUP_ROUNDS (0 turns warm-up off).
 */
export function envOverrides(runner: string, env: NodeJS.ProcessEnv = process.env): RunnerOverrides {
  const prefix = `BUNDLE_RUNNER_${envName(runner)}_`
  const get = (k: string) => env[prefix + k]
  const num = (k: string) => {
    const v = get(k)
    if (v === undefined) return undefined
    const n = Number(v)
    if (v.trim() === '' || Number.isNaN(n)) throw bad(`${prefix}${k}="${v}" is not a number`)
    return n
  }
  const raw: Record<string, unknown> = {}
  const batching: Record<string, unknown> = {}
  if (get('WORKERS') !== undefined) raw.workers = num('WORKERS')
  if (get('ISOLATION') !== undefined) raw.isolation = get('ISOLATION')!.trim().toLowerCase()
  if (get('MIN_WORKERS') !== undefined) raw.minWorkers = num('MIN_WORKERS')
  if (get('MAX_WORKERS') !== undefined) raw.maxWorkers = num('MAX_WORKERS')
  if (get('TIMEOUT_MS') !== undefined) raw.timeoutMs = num('TIMEOUT_MS')
  if (get('DEADLINE_MS') !== undefined) raw.deadlineMs = num('DEADLINE_MS')
  if (get('BATCHES_PER_WORKER') !== undefined) raw.batchesPerWorker = num('BATCHES_PER_WORKER')
  if (get('IDLE_UNLOAD_MS') !== undefined) raw.idleUnloadMs = num('IDLE_UNLOAD_MS')
  if (get('INTRA_OP_THREADS') !== undefined) raw.intraOpThreads = num('INTRA_OP_THREADS')
  if (get('EXECUTION_PROVIDERS') !== undefined)
    raw.executionProviders = get('EXECUTION_PROVIDERS')!
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  if (get('BATCHING_ENABLED') !== undefined) {
    const v = get('BATCHING_ENABLED')!.toLowerCase()
    if (!['true', 'false', '1', '0'].includes(v)) throw bad(`${prefix}BATCHING_ENABLED must be true or false`)
    batching.enabled = v === 'true' || v === '1'
  }
  if (get('BATCHING_MAX_BATCH_SIZE') !== undefined) batching.maxBatchSize = num('BATCHING_MAX_BATCH_SIZE')
  if (get('BATCHING_MAX_DELAY_MS') !== undefined) batching.maxDelayMs = num('BATCHING_MAX_DELAY_MS')
  if (get('BATCHING_MAX_QUEUE_SIZE') !== undefined) batching.maxQueueSize = num('BATCHING_MAX_QUEUE_SIZE')
  if (get('BATCHING_MAX_LATENCY_MS') !== undefined) batching.maxLatencyMs = num('BATCHING_MAX_LATENCY_MS')
  const batchDim = get('BATCHING_BATCH_DIM')
  if (batchDim !== undefined)
    batching.batchDim = batchDim.includes(',')
      ? batchDim.split(',').map((d) => (d.trim() === '' ? NaN : Number(d)))
      : batchDim.trim() === ''
        ? NaN
        : Number(batchDim)
  if (Object.keys(batching).length) raw.batching = batching
  if (get('WARMUP_ROUNDS') !== undefined) raw.warmup = { rounds: num('WARMUP_ROUNDS') }
  const resources: Record<string, unknown> = {}
  if (get('CPU') !== undefined) resources.cpu = num('CPU')
  const gpu = get('GPU')
  if (gpu !== undefined)
    resources.gpu = gpu.includes(',') || !/^\d*\.?\d+$/.test(gpu) ? gpu.split(',').map((s) => s.trim()) : Number(gpu)
  if (Object.keys(resources).length) raw.resources = resources
  return validateOverrides(`environment (${prefix}*)`, raw)
}

/** code < file < environment; nested batching/resources merge key by key. */
export function mergeOverrides<T extends RunnerOverrides>(base: T, ...layers: RunnerOverrides[]): T {
  let out: T = { ...base }
  for (const l of layers) {
    out = {
      ...out,
      ...l,
      ...(l.batching || out.batching ? { batching: { ...out.batching, ...l.batching } } : {}),
      ...(l.resources || out.resources ? { resources: { ...out.resources, ...l.resources } } : {}),
      // warmup: false replaces; a mapping merges into an earlier mapping.
      ...(l.warmup !== undefined
        ? {
            warmup:
              l.warmup === false || out.warmup === false || out.warmup === undefined
                ? l.warmup
                : { ...out.warmup, ...l.warmup },
          }
        : {}),
    }
  }
  return out
}
