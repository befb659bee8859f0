import { BundleError } from '../../errors/index.js'
import { ModelStore, type ModelInfo } from '../../store/index.js'
import { Dispatcher, type DispatchObserver } from '../batching/dispatcher.js'
import { resolveBatching } from '../defaults.js'
import type { RunnerMetrics } from '../metrics.js'
import { startPool, type Pool } from '../pool/pool.js'
import type { SequenceSpec } from '../sequence/protocol.js'
import type { PoolOptions, WorkerPool } from '../pool/worker-pool.js'
import type { RemotePool } from '../remote/remote-pool.js'
import { SequenceBatcher } from '../sequence/batcher.js'
import { DEFAULT_SEQUENCE_IDLE_MS, resolveSequence } from '../sequence/options.js'
import { runOnnxBatch } from './batch.js'
import { type Generation, type Request, startLocal } from './generation.js'
import { signatureOf } from './inference.js'
import type { TensorSpec } from '../inference.js'
import { lookUpModel } from './model-lookup.js'
import type { OnnxRunnerOptions } from './options.js'
import { batchDims } from './warmup.js'
import type { ModelHost } from '../hosting/model-host.js'
import { type BatchPlan, decideBatching } from './batch-plan.js'
import { verifyBeforeLoad } from './trust.js'

/** What building a generation needs of its runner. */
export interface PrepareContext {
  name: string
  /** The server's metrics, once attached, and the runner's /v2 statistics: every batcher feeds both. */
  observer: () => DispatchObserver
  metrics: () => RunnerMetrics | undefined
  /** A default warm-up failed on a worker; the model serves anyway. */
  warmupFailed: (err: Error) => void
  /** Where the workers' output lines go (unset: this process's stdout and stderr). */
  output?: PoolOptions['output']
  /** Under a memory budget: the shared model host the model opens in, instead of workers of its own. */
  host?: { host: ModelHost; onLost: () => void } | undefined
  /** Remote mode: the pool whose batches become jobs in Redis. */
  remotePool?:
    | ((o: { timeoutMs: number; digest: string; onCapacity: (slots: number) => void }) => RemotePool)
    | undefined
}

/**
 * Loads one generation of a runner's model with `options`: its workers (local, or remote ones fed
 * through Redis) and its batcher — the adaptive one, or a sequence batcher for a stateful model.
 */
export async function prepareGeneration(
  ctx: PrepareContext,
  options: OnnxRunnerOptions,
  tag: string,
  pinned: { tag: string; digest: string } | undefined,
): Promise<Generation> {
  const store = ModelStore.open(options.home ? { home: options.home } : {})
  try {
    const { info, onnxPath } = lookUpModel(store, ctx.name, tag, pinned)
    // With --trust, a model is verified (signature and every file) before anything of it runs.
    await verifyBeforeLoad(store, info)
    const plan = planFor(ctx.name, options, signatureOf(info, onnxPath))
    if (ctx.remotePool) return await prepareRemote(ctx, ctx.remotePool, options, info, onnxPath, plan)
    // Exactly the version looked up (and verified), even if the tag moved meanwhile.
    const { model, files } = await store.paths(info.tag)
    if (model.digest !== info.digest)
      throw new BundleError('E_STORE_CORRUPT', `${info.tag} changed while it was being loaded; load it again`)
    const sequence =
      options.sequence && resolveSequence(ctx.name, options.sequence, signatureOf(info, onnxPath), batchDims(options))
    let batcher: SequenceBatcher | undefined
    const started = startLocal({
      name: ctx.name,
      options,
      model,
      onnxPath,
      modelFile: files[onnxPath]!,
      plan,
      onWarmupFailed: ctx.warmupFailed,
      ...(ctx.output ? { output: ctx.output } : {}),
      sequence,
      onWorkerEvent: (e) => batcher?.workerEvent(e),
      host: ctx.host,
      newDispatcher: (slots, pool, depth) =>
        sequence
          ? (batcher = newSequenceBatcher(ctx, options, sequence, slots, pool))
          : newDispatcher(ctx, options, plan, slots, pool, depth),
    })
    // A generation that could not start serves nothing: its batcher's eviction timer goes too.
    return await started.catch((err: unknown) => {
      batcher?.close()
      throw err
    })
  } finally {
    store.close()
  }
}

/**
 * What a generation of `tag` would serve, from the store alone (nothing loaded): the model, its
 * signature, how its requests are batched, and its files' bytes. A model under a memory budget is
 * described at start-up and loaded on its first request.
 */
export function describeModel(
  name: string,
  options: OnnxRunnerOptions,
  tag: string,
  pinned: { tag: string; digest: string } | undefined,
): {
  model: ModelInfo
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] }
  plan: BatchPlan
  fileBytes: number
} {
  const store = ModelStore.open(options.home ? { home: options.home } : {})
  try {
    const { info, onnxPath } = lookUpModel(store, name, tag, pinned)
    const signature = signatureOf(info, onnxPath)
    const plan = planFor(name, options, signature)
    return { model: info, signature, plan, fileBytes: info.files.reduce((n, f) => n + f.size, 0) }
  } finally {
    store.close()
  }
}

/**
 * How a generation's requests reach its model: a stateful model batches along the dimensions its
 * options give (its sequence settings are checked against the model on their own); any other
 * model as its signature and the options decide (batch-plan.ts).
 */
function planFor(
  runner: string,
  options: OnnxRunnerOptions,
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] },
): BatchPlan {
  if (options.sequence)
    return {
      batched: true,
      dims: batchDims(options),
      maxBatchSize: resolveBatching(options).maxBatchSize,
      reason: 'a stateful model: frames of different sequences share batches',
    }
  return decideBatching(runner, signature, options)
}

/** What every batcher of a runner is set up with: its deadline, window and sizes, its metrics. */
function batcherSettings(ctx: PrepareContext, options: OnnxRunnerOptions, plan?: BatchPlan) {
  const b = resolveBatching(options)
  // A model that runs requests as given: one request a batch, whatever its rows.
  const unbatched = plan !== undefined && !plan.batched
  return {
    maxBatchSize: unbatched ? 1 : b.maxBatchSize,
    maxDelayMs: b.maxDelayMs,
    deadlineMs: b.deadlineMs,
    maxQueueSize: b.maxQueueSize,
    batching: b.enabled && !unbatched,
    observer: ctx.observer(),
  }
}

/** The batcher of one generation: batches go to `pool()` (set once the pool exists). */
function newDispatcher(
  ctx: PrepareContext,
  options: OnnxRunnerOptions,
  plan: BatchPlan,
  slots: number,
  pool: () => Pool,
  depth: number,
): Dispatcher<Request, Request> {
  return new Dispatcher<Request, Request>(
    { ...batcherSettings(ctx, options, plan), slots, depth },
    (slices, _rows, report) => runOnnxBatch(ctx.name, pool(), slices, plan, report),
  )
}

/** The sequence batcher of a stateful model's generation: a batcher per worker, each sequence on one. */
function newSequenceBatcher(
  ctx: PrepareContext,
  options: OnnxRunnerOptions,
  spec: SequenceSpec,
  workers: number,
  pool: () => WorkerPool,
): SequenceBatcher {
  return new SequenceBatcher({
    runner: ctx.name,
    spec,
    workers,
    idleTimeoutMs: options.sequence?.idleTimeoutMs ?? DEFAULT_SEQUENCE_IDLE_MS,
    dispatcher: { ...batcherSettings(ctx, options), depth: resolveBatching(options).batchesPerWorker },
    pool,
    onEvicted: (n) => ctx.metrics()?.sequences(ctx.name, 'evicted', n),
    onLost: (n) => ctx.metrics()?.sequences(ctx.name, 'lost', n),
  })
}

/** A generation whose batches go to remote workers: no model files or processes here. */
async function prepareRemote(
  ctx: PrepareContext,
  remotePool: NonNullable<PrepareContext['remotePool']>,
  options: OnnxRunnerOptions,
  model: ModelInfo,
  onnxPath: string,
  plan: BatchPlan,
): Promise<Generation> {
  // The batcher sends as many batches at once as the live workers take.
  const dispatcher = newDispatcher(ctx, options, plan, 1, () => pool, 1)
  const pool = await startPool(
    remotePool({
      timeoutMs: resolveBatching(options).timeoutMs,
      digest: model.digest,
      onCapacity: (slots) => dispatcher.setSlots(slots),
    }),
  )
  return {
    model,
    signature: signatureOf(model, onnxPath),
    plan,
    warmupPlan: 'on the remote workers',
    workers: 0,
    pool,
    dispatcher,
  }
}
