import { availableParallelism } from 'node:os'
import { BundleError } from '../../errors/index.js'
import type { ModelInfo } from '../../store/index.js'
import type { Dispatcher } from '../batching/dispatcher.js'
import { resolveBatching, RUNNER_DEFAULTS } from '../defaults.js'
import { gpuDevices } from '../gpu/devices.js'
import { placeWorkers, type GpuRequest } from '../gpu/placement.js'
import type { TensorSpec } from '../inference.js'
import type { BackendSpec, WireTensor } from '../pool/protocol.js'
import { ONNX_RUN, onnxBackend } from './protocol.js'
import { SEQUENCE_RUN, sequenceBackend, type SequenceRunArgs, type SequenceSpec } from '../sequence/protocol.js'
import { type PoolOptions, WorkerPool } from '../pool/worker-pool.js'
import { startPool, type Pool } from '../pool/pool.js'
import type { SequenceBatcher } from '../sequence/batcher.js'
import { signatureOf } from './inference.js'
import type { OnnxRunnerOptions } from './options.js'
import type { BatchPlan } from './batch-plan.js'
import { defaultCpuWorkers, modelThreads } from './threads.js'
import { warmupPlan } from './warmup.js'
import { HostedPool } from '../hosting/hosted-pool.js'
import type { ModelHost } from '../hosting/model-host.js'

/** One request's tensors on their way to a worker. */
export type Request = Record<string, WireTensor>

/** A generation's batcher: the adaptive one, or, for a stateful model, the sequence batcher. */
export type GenerationBatcher = Dispatcher<Request, Request> | SequenceBatcher

/** One loaded model version: its workers and batcher (a swap prepares the next while this one serves). */
export interface Generation {
  model: ModelInfo
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] }
  /** How requests reach the model: merged into batches, or each as given. */
  plan: BatchPlan
  /** The warm-up as /runners shows it. */
  warmupPlan: unknown
  workers: number
  /** onnxruntime's intra-op threads in each worker (undefined: onnxruntime's own default). */
  threads?: number | undefined
  pool: Pool
  dispatcher: GenerationBatcher
  /** A stateful model's state and constants, as its workers keep them. */
  sequence?: SequenceSpec | undefined
  /** The devices each worker sees (CUDA_VISIBLE_DEVICES), for runners placed on GPUs. */
  gpus?: string[][] | undefined
  /** In a shared model host: what opening the model cost the host (resident memory). */
  bytes?: number | undefined
}

// Device discovery runs only for runners that ask for a GPU (nvidia-smi costs a process spawn).
const devicesFor = (gpu: GpuRequest | undefined): string[] => (gpu === undefined || gpu === 0 ? [] : gpuDevices())

/** What startLocal needs to start a generation. */
export interface LocalGeneration {
  name: string
  options: OnnxRunnerOptions
  model: ModelInfo
  onnxPath: string
  /** The checked-out .onnx file. */
  modelFile: string
  plan: BatchPlan
  /** A default warm-up failed (the model loads anyway): told why, once per worker. */
  onWarmupFailed?: (err: Error) => void
  /** Where the workers' output lines go (unset: this process's stdout and stderr). */
  output?: PoolOptions['output']
  newDispatcher: (slots: number, pool: () => WorkerPool, depth: number) => GenerationBatcher
  /** A stateful model: its workers keep each sequence's state (see runners/sequence/). */
  sequence?: SequenceSpec | undefined
  /** Told when a worker crashes, times out or restarts (a sequence batcher loses that worker's sequences). */
  onWorkerEvent?: (e: { type: 'crash' | 'restart' | 'timeout'; index: number; detail: string }) => void
  /** Open the model in this shared host instead of workers of its own (`--memory-budget`); `onLost`: the host died. */
  host?: { host: ModelHost; onLost: () => void } | undefined
}

/** How many workers, on which devices, with how many threads each, under which isolation. */
function placement(o: LocalGeneration) {
  const cpu = o.options.resources?.cpu
  const gpu = o.options.resources?.gpu
  const providersGiven = o.options.executionProviders
  const onCpu = providersGiven ? providersGiven.every((p) => p === 'cpu') : !gpu
  const workers = o.options.minWorkers ?? o.options.workers ?? defaultWorkers(o, onCpu)
  // GPU workers each see only their devices (CUDA_VISIBLE_DEVICES) and ask for CUDA.
  const gpus = placeWorkers(workers, gpu, devicesFor(gpu))
  const providers = o.options.executionProviders ?? (gpus ? ['cuda'] : undefined)
  const { threads, answerAwake } = modelThreads({
    intraOpThreads: o.options.intraOpThreads,
    cpu,
    onCpu,
    workers: o.options.maxWorkers ?? workers,
  })
  const isolation = o.options.isolation ?? RUNNER_DEFAULTS.isolation
  // CUDA_VISIBLE_DEVICES is read once per process: GPU placement needs a process per worker.
  if (isolation === 'thread' && gpus)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `runner ${o.name}: isolation 'thread' runs workers inside the API process, where each cannot see only its ` +
        `own GPUs; use isolation 'process' with resources.gpu`,
    )
  return { workers, threads, gpus, providers, isolation, answerAwake }
}

/**
 * Workers when the runner names none: a core's worth each with resources.cpu; one where the
 * autoscaler adds more (maxWorkers) or on an accelerator; on the CPU, two where a second copy of
 * the model fits (threads.ts, defaultCpuWorkers).
 */
function defaultWorkers(o: LocalGeneration, onCpu: boolean): number {
  const cpu = o.options.resources?.cpu
  if (cpu) return Math.max(1, Math.floor(availableParallelism() / cpu))
  if (o.options.maxWorkers !== undefined || !onCpu) return RUNNER_DEFAULTS.workers
  // Every file of the model counts: a large model keeps its weights beside the graph (external data).
  return defaultCpuWorkers(o.model.files.reduce((n, f) => n + f.size, 0))
}

/**
 * The pool's warm-up: the planned calls (a sequence's as one-frame sequences that leave no state),
 * their timings seeding the batcher; none when nothing is to be warmed.
 */
function warmupOf(
  o: LocalGeneration,
  warm: ReturnType<typeof warmupPlan>,
  dispatcher: GenerationBatcher,
  b: ReturnType<typeof resolveBatching>,
): Pick<PoolOptions, 'warmup'> {
  if (warm.calls.length === 0) return {}
  const seq = o.sequence
  return {
    warmup: {
      method: seq ? SEQUENCE_RUN : ONNX_RUN,
      steps: warm.calls.map((c) => ({
        rows: c.rows,
        untimed: c.untimed,
        timed: c.timed,
        args: () => {
          const inputs = c.inputs()
          if (!seq) return { inputs }
          // Sequences of one frame each (start and end): they leave no state behind.
          const frames = Array.from({ length: c.rows }, (_, i) => ({ id: `warm-up ${i}`, start: true, end: true }))
          return { inputs, rows: frames } satisfies SequenceRunArgs
        },
      })),
      // Warm-up timings seed the batcher: it starts with measured batch times.
      observe: (rows: number, ms: number) => dispatcher.model.observe(rows, ms),
      // A batch twice this size would already blow the latency bound: bigger ones
      // are not worth warming (start-up time), the batcher measures them if it ever uses them.
      enough: (_rows: number, ms: number) => b.enabled && o.plan.batched && 2 * ms > b.deadlineMs,
      ...(warm.required ? {} : { optional: (err: Error) => o.onWarmupFailed?.(err) }),
    },
  }
}

/**
 * Starts a generation whose batches run in worker processes on this machine: as many workers
 * as asked (or as the cores hold, with resources.cpu), placed on GPUs when asked, each warmed
 * up before it reports ready — its warm-up timings seed the batcher.
 */
export async function startLocal(o: LocalGeneration): Promise<Generation> {
  if (o.host) return startHosted(o, o.host)
  const { workers, threads, gpus, providers, isolation, answerAwake } = placement(o)
  const b = resolveBatching(o.options)
  // Each generation's batches run on its own workers (a swap drains the old ones there).
  let pool: WorkerPool | undefined
  const dispatcher = o.newDispatcher(workers, () => pool!, b.batchesPerWorker)
  const signature = signatureOf(o.model, o.onnxPath)
  const seq = o.sequence
  // A sequence runner's callers send neither its state nor its constants: neither is warmed as an input.
  const fed = new Set(seq ? [...seq.state.map((s) => s.input), ...Object.keys(seq.constants)] : [])
  const warm = warmupPlan(
    o.name,
    o.options,
    signature.inputs.filter((i) => !fed.has(i.name)),
    o.plan,
    { enabled: b.enabled, maxBatchSize: b.maxBatchSize },
  )
  pool = new WorkerPool({
    isolation,
    answerAwake,
    depth: b.batchesPerWorker,
    ...(gpus ? { env: (i: number) => ({ CUDA_VISIBLE_DEVICES: gpus[i]!.join(',') }) } : {}),
    runner: o.name,
    workers,
    timeoutMs: b.timeoutMs,
    ...(o.onWorkerEvent ? { onEvent: o.onWorkerEvent } : {}),
    ...(o.output ? { output: o.output } : {}),
    backend: backendOf(o.modelFile, providers, threads, seq),
    ...warmupOf(o, warm, dispatcher, b),
  })
  await startPool(pool)
  return {
    model: o.model,
    signature,
    plan: o.plan,
    warmupPlan: warm.view,
    workers,
    threads,
    pool,
    dispatcher,
    sequence: seq,
    gpus,
  }
}

/**
 * A generation in a shared model host: one session there, its batches run one at a time in that
 * host (a host per core runs models side by side), its warm-up as a worker's would be.
 */
async function startHosted(o: LocalGeneration, h: NonNullable<LocalGeneration['host']>): Promise<Generation> {
  if (o.sequence || o.options.resources?.gpu)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `runner ${o.name}: a model served under --memory-budget shares a host process with others; a stateful ` +
        'model (sequence) or one placed on GPUs needs workers of its own: serve it without --memory-budget',
    )
  const b = resolveBatching(o.options)
  let pool: HostedPool | undefined
  const dispatcher = o.newDispatcher(1, () => pool as unknown as WorkerPool, 1)
  const signature = signatureOf(o.model, o.onnxPath)
  const planned = warmupPlan(o.name, o.options, signature.inputs, o.plan, {
    enabled: b.enabled,
    maxBatchSize: b.maxBatchSize,
  })
  // A load on demand keeps a request waiting: by default one row is warmed, not every batch size
  // (the batcher learns the others from traffic); a warm-up the operator configured runs whole.
  const warm = o.options.warmup === undefined ? { ...planned, calls: planned.calls.slice(0, 1) } : planned
  // One intra-op thread a session: the hosts, one a core, run models side by side instead.
  const threads = o.options.intraOpThreads ?? 1
  pool = new HostedPool(h.host, {
    runner: o.name,
    backend: sessionOptions(o.modelFile, o.options.executionProviders, threads),
    warmup: warmupOf(o, warm, dispatcher, b).warmup,
    onLost: h.onLost,
  })
  await startPool(pool)
  return {
    model: o.model,
    signature,
    plan: o.plan,
    warmupPlan: warm.view,
    workers: 1,
    threads,
    pool,
    dispatcher,
    bytes: pool.bytes,
  }
}

/** The onnxruntime session a worker (or a model host) opens. */
const sessionOptions = (modelPath: string, providers: string[] | undefined, threads: number | undefined) => ({
  modelPath,
  ...(providers ? { executionProviders: providers } : {}),
  ...(threads ? { intraOpThreads: threads } : {}),
})

/** What the workers load: the onnx backend, or the sequence backend for a stateful model. */
function backendOf(
  modelPath: string,
  providers: string[] | undefined,
  threads: number | undefined,
  seq: SequenceSpec | undefined,
): BackendSpec {
  const o = sessionOptions(modelPath, providers, threads)
  return seq ? sequenceBackend({ ...o, sequence: seq }) : onnxBackend(o)
}
