import { BundleError } from '../errors/index.js'
import type { ModelInfo } from '../store/index.js'
import type { DispatcherStats } from './batching/dispatcher.js'
import { mergeOverrides, type RunnerOverrides } from './config.js'
import type { InferenceModel, TensorSpec } from './inference.js'
import { bothObservers, RunnerStats } from './stats.js'
import { isLocalPool, isRemotePool } from './pool/pool.js'
import type { RemoteTarget } from './remote/target.js'
import type { ResponseCache } from './remote/cache.js'
import { openResponseCache, throughCache } from './onnx/response-cache.js'
import type { RedisLink } from './remote/link.js'
import { autoscale } from './autoscaler.js'
import { RUNNER_DEFAULTS } from './defaults.js'
import { currentCall, submitOptionsOf } from './call-context.js'
import { CallTrace, type TraceCarrier, traced } from './tracing/index.js'
import { type LoadSource, PooledRunner } from './pooled-runner.js'
import type { RunnerVersions, VersionedRunner } from './runner.js'
import type { RunnerTensor } from './tensor.js'
import type { OnnxRunnerOptions } from './onnx/options.js'
import { batchDims } from './onnx/warmup.js'
import type { Generation, GenerationBatcher } from './onnx/generation.js'
import { workersPerDevice } from './gpu/placement.js'
import { joinParts, onnxRequest } from './onnx/batch.js'
import { inferenceModel } from './onnx/inference.js'
import { effectiveConfig } from './onnx/effective-config.js'
import { type PrepareContext, prepareGeneration } from './onnx/prepare.js'
import type { RunnerHealth } from './metrics.js'
import { SequenceBatcher, type SequenceStats } from './sequence/batcher.js'
import { frameOf, frameRequest, type RunOptions, type SequenceFrame } from './sequence/options.js'
import { refuseConflicts } from './sequence/setup.js'
import { describeModel } from './onnx/prepare.js'
import { ModelPresence, type PresenceOwner } from './onnx/presence.js'
import type { ModelCache } from './memory/model-cache.js'
import type { ModelHost } from './hosting/model-host.js'
import { resolveBatching } from './defaults.js'

export type { BatchingOptions, OnnxRunnerOptions, WarmupOptions } from './onnx/options.js'
export type { RunOptions } from './sequence/options.js'

type Inputs = Record<string, RunnerTensor>
type Outputs = Record<string, RunnerTensor>

/**
 * A model from the store, run by onnxruntime-node in worker processes behind the adaptive
 * batcher. The exact version is pinned when the runner starts.
 *
 * @example
 * const cls = onnxRunner('ocr-cls:latest', { batching: { maxBatchSize: 32, maxLatencyMs: 50 }, workers: 1 })
 * const { 'softmax_0.tmp_0': probs } = await cls.run({ x })
 *
 * // A stateful model: each sequence's state stays in its worker between frames.
 * const vad = onnxRunner('silero-vad:latest', {
 *   sequence: { state: [{ input: 'h', output: 'hn', batchAxis: 1 }, { input: 'c', output: 'cn', batchAxis: 1 }],
 *               constants: { sr: { dtype: 'int64', shape: [1], data: new BigInt64Array([16000n]) } } },
 * })
 * const { output } = await vad.run({ input: frame }, { sequence: { id: 'client-42', start: true } })
 */
export class OnnxRunner extends PooledRunner implements VersionedRunner {
  readonly kind = 'onnx' as const
  model: ModelInfo | undefined
  readonly versions: RunnerVersions = this
  private dispatcher: GenerationBatcher | undefined
  /** What the serving generation runs with: the options it started from, its workers and warm-up. */
  private running:
    | (Pick<Generation, 'workers' | 'threads' | 'sequence' | 'gpus' | 'plan'> & {
        options: OnnxRunnerOptions
        warmup: unknown
      })
    | undefined
  /** Why the last default warm-up failed (the model serves anyway); shown with the warm-up. */
  private warmupFailure: string | undefined

  private pinned: { tag: string; digest: string } | undefined
  /** Whether the model is in memory: idle unloads, and loads and evictions under a memory budget. */
  private readonly presence = new ModelPresence(this.presenceOwner())
  private stopScaling: (() => void) | undefined
  /** Open Inference Protocol statistics (requests, queue and compute time, per batch size). */
  readonly inferenceStats = new RunnerStats()
  private signature: { inputs: TensorSpec[]; outputs: TensorSpec[] } | undefined

  private redis: RedisLink | undefined
  private cache: ResponseCache | undefined

  /** Before start: batches on remote workers — refused for a sequence runner, whose state lives in its workers. */
  override useRemote(target: RemoteTarget): void {
    refuseConflicts(this.name, this.options, true)
    super.useRemote(target)
  }

  /**
   * Before start: the model is loaded on its first request and evicted when the cache needs its
   * room (`bundle serve --memory-budget`), in a model host shared with other models.
   */
  useMemoryBudget(cache: ModelCache, host: ModelHost): void {
    if (this.target)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `runner ${this.name}: --memory-budget bounds this server's own processes; with --runners remote the ` +
          'models live on the remote workers',
      )
    this.presence.residency = { cache, host }
  }

  /** Before start: the server's Redis (--redis), for the response cache. */
  useRedis(link: RedisLink): void {
    this.redis = link
  }

  /** Every call counts as use, remote batches too: an idle-unloaded model loads again for it. */
  protected override wake(): Promise<void> | undefined {
    return this.presence.wake()
  }

  /**
   * A remote worker's batch (`bundle worker --models … --memory-budget`): under a budget the model
   * is loaded for it, within the batch's deadline, and kept from eviction until it is answered.
   */
  override async execute(method: string, args: unknown, trace?: TraceCarrier[], deadline?: number): Promise<unknown> {
    if (this.presence.residency === undefined) return super.execute(method, args, trace)
    const release = await this.presence.acquire(deadline ?? this.callDeadline(performance.now()))
    try {
      return await super.execute(method, args, trace)
    } finally {
      release?.()
    }
  }

  override get idleUnloads(): number {
    return this.presence.idleUnloads
  }

  override digest(): string | undefined {
    return this.model?.digest
  }

  /** Serve exactly this model version and content (a bundle's pin), whatever `tag` would resolve to now. */
  pin(tag: string, digest: string): void {
    this.pinned = { tag, digest }
  }

  /** Operator overrides (serve config file, environment), applied before start. */
  configure(overrides: RunnerOverrides): void {
    this.options = mergeOverrides(this.options, overrides)
  }

  /**
   * Once started, what the serving generation really runs with (its model, the workers it
   * started, its batching and warm-up); before, what start() would use. Overrides given after
   * start show once a load or swap applies them.
   */
  effectiveConfig(): Record<string, unknown> {
    return effectiveConfig({
      kind: this.kind,
      tag: this.tag,
      model: this.model,
      options: this.options,
      running: this.running,
      remote: this.target !== undefined,
      warmupFailure: this.warmupFailure,
    })
  }

  /** The batcher's state: queue, batches running, the batch size it aims for, batches timed. */
  /** Replicas' worth of work offered to this runner (bundle_desired_replicas); a sequence runner has none yet. */
  loadRatio(): number | undefined {
    // Batches on remote workers measure the workers, not this replica (bundle_runner_desired_workers).
    if (isRemotePool(this.pool)) return undefined
    const d = this.dispatcher
    return d && 'load' in d ? d.load().ratio : undefined
  }

  protected override batchers(): Iterable<LoadSource> {
    const d = this.dispatcher
    return d && 'load' in d ? [d] : []
  }

  stats(): (DispatcherStats & { sequences?: SequenceStats }) | undefined {
    return this.dispatcher?.stats()
  }

  queueDepth(): Record<string, number> {
    return { run: this.dispatcher?.stats().queuedRows ?? 0 }
  }

  constructor(
    readonly tag: string,
    private options: OnnxRunnerOptions = {},
  ) {
    super(options.name ?? tag.split(/[:@]/)[0]!)
  }

  async start(): Promise<void> {
    this.markStarted()
    refuseConflicts(this.name, this.options, this.target !== undefined)
    this.cache = openResponseCache(this.name, this.options.cache, this.redis)
    // Under a memory budget the model is described from the store (its /v2 metadata answers at once)
    // and handed to the cache, which loads it on its first request.
    if (this.presence.residency)
      return this.presence.startResident(this.describe(this.pinned?.tag ?? this.tag).fileBytes)
    this.apply(await this.prepare(this.pinned?.tag ?? this.tag, this.pinned))
    this.presence.watchIdle(this.options.idleUnloadMs)
    this.watchLoad()
  }

  /** What the model's presence in memory (idle unloads, a memory budget's cache) does with this runner. */
  private presenceOwner(): PresenceOwner {
    return {
      name: this.name,
      reload: async () => {
        const g = await this.prepare(this.model?.tag ?? this.pinned?.tag ?? this.tag, this.pinned)
        this.apply(g)
        return g.bytes ?? 0
      },
      detach: async () => {
        const pool = this.pool
        const d = this.dispatcher
        this.dispatcher = undefined
        this.pool = undefined
        await d?.drain()
        await pool?.stop()
      },
      busy: (sequences) => {
        const d = this.dispatcher
        if (d === undefined) return false
        const { queuedRows, inFlight } = d.stats()
        return queuedRows > 0 || inFlight > 0 || (sequences && d instanceof SequenceBatcher && d.active() > 0)
      },
      serving: () => this.dispatcher !== undefined,
    }
  }

  /** Worker autoscaling between minWorkers and maxWorkers (see autoscaler.ts); CPU runners only. */
  private watchLoad(): void {
    this.stopScaling?.()
    this.stopScaling = undefined
    const min = this.options.minWorkers ?? this.options.workers ?? RUNNER_DEFAULTS.workers
    const max = this.options.maxWorkers
    if (max === undefined || max <= min || this.options.resources?.gpu || this.target) return
    this.stopScaling = autoscale(
      { dispatcher: () => this.dispatcher, pool: () => (isLocalPool(this.pool) ? this.pool : undefined) },
      { min, max, intervalMs: this.options.scaleIntervalMs ?? RUNNER_DEFAULTS.scaleIntervalMs },
    )
  }

  /** Whether the model is in memory now (false while unloaded for idleness or stopped). */
  override loaded(): boolean {
    return !this.presence.suspended && this.pool !== undefined && this.dispatcher !== undefined
  }

  /** The model, signature and batching of `tag` from the store, as a generation would serve them, nothing loaded. */
  private describe(tag: string): { fileBytes: number } {
    const d = describeModel(this.name, this.options, tag, this.pinned)
    this.model = d.model
    this.signature = d.signature
    this.running = {
      options: this.options,
      workers: 1,
      warmup: 'when the model loads',
      plan: d.plan,
      sequence: undefined,
      gpus: undefined,
    }
    return d
  }

  /**
   * Zero-failure version swap: loads `tag` in new workers and warms them while the current
   * model keeps serving, switches new requests to it at once when it is ready, then lets the
   * previous model's queued and running requests finish on its own workers before they stop.
   * If the new model cannot start, nothing changes.
   */
  async swap(tag: string): Promise<void> {
    if (this.target) {
      throw new BundleError(
        'E_INPUT_INVALID',
        `runner ${this.name} runs on remote workers: ` +
          'change its version by deploying API servers and workers of a new bundle',
      )
    }
    // Not loaded under a memory budget: the next load is of the new version.
    if (this.presence.residency && this.presence.suspended) return void this.describe(tag)
    const next = await this.prepare(tag, undefined)
    const previous = { dispatcher: this.dispatcher, pool: this.pool }
    this.apply(next)
    this.presence.residency?.cache.resized(this.name, next.bytes ?? 0)
    // The operator chose this version: an idle unload later loads it again, not the old pin.
    if (this.pinned) this.pinned = { tag: next.model.tag, digest: next.model.digest }
    await previous.dispatcher?.drain()
    await previous.pool?.stop()
  }

  /** Switches to a prepared generation in one synchronous step: no request sees half of it. */
  private apply(g: Generation & { options: OnnxRunnerOptions }): void {
    // The sequences the previous generation's workers hold do not move: their next frames say so.
    if (this.dispatcher instanceof SequenceBatcher && g.dispatcher instanceof SequenceBatcher)
      g.dispatcher.inherit(this.dispatcher, `the runner switched to model ${g.model.tag}`)
    this.model = g.model
    this.signature = g.signature
    this.running = {
      options: g.options,
      workers: g.workers,
      threads: g.threads,
      warmup: g.warmupPlan,
      sequence: g.sequence,
      gpus: g.gpus,
      plan: g.plan,
    }
    this.pool = g.pool
    this.dispatcher = g.dispatcher
    this.presence.serving()
  }

  /** Starts a generation of `tag` with the options as they are now (it keeps them: see effectiveConfig). */
  private async prepare(
    tag: string,
    pinned: { tag: string; digest: string } | undefined,
  ): Promise<Generation & { options: OnnxRunnerOptions }> {
    const options = this.options
    const target = this.target
    this.warmupFailure = undefined
    const ctx: PrepareContext = {
      name: this.name,
      warmupFailed: (err) => {
        const first = this.warmupFailure === undefined
        this.warmupFailure = err.message
        // Once per generation, not once per worker: every worker fails the same way.
        if (first)
          this.log?.warn(
            { runner: this.name, model: tag, err: err.message },
            `runner ${this.name}: the default warm-up failed (${err.message}); the model serves anyway. Give ` +
              'warmup.shapes or warmup.samples with valid inputs, or set warmup: false',
          )
      },
      output: this.workerOutput(),
      observer: () => bothObservers(this.metrics?.observer(this.name, 'run'), this.inferenceStats.observer()),
      metrics: () => this.metrics,
      remotePool: target && ((o) => this.remotePool(target, o)),
      host: this.presence.residency && { host: this.presence.residency.host, onLost: () => this.presence.lost() },
    }
    return { ...(await prepareGeneration(ctx, options, tag, pinned)), options }
  }

  /** A stateful model's frames go to the worker that holds their sequence. */
  protected override callsPinned(): boolean {
    return this.options.sequence !== undefined
  }

  override ready(): boolean {
    // Unloaded for idleness still counts as ready: the next request loads it.
    return this.presence.suspended || super.ready()
  }

  /**
   * Runs the model on `inputs`: a model that batches takes rows along its batch dimension (0
   * unless configured) and results keep the request's rows; any other model runs the tensors
   * exactly as given. Every call counts in the model's /v2 statistics, whether it came
   * from a service API, an ensemble or /v2 itself.
   */
  async run(inputs: Inputs, options: RunOptions = {}): Promise<Outputs> {
    const started = performance.now()
    let release: (() => void) | undefined
    try {
      // Under a memory budget: loaded (or loading) and kept from eviction until this call is answered.
      if (this.presence.residency) release = await this.presence.acquire(this.callDeadline(started))
      const frame = frameOf(this.name, this.options.sequence, options.sequence)
      const out = frame
        ? await this.submitFrame(inputs, frame)
        : this.cache && this.model
          ? await throughCache(
              this.cache,
              this.model.digest,
              inputs,
              (x) => this.submit(x),
              (hit) => this.metrics?.cacheLookup(this.name, hit),
            )
          : await this.submit(inputs)
      this.inferenceStats.request(true, this.rowsOf(inputs), performance.now() - started)
      return out
    } catch (err) {
      this.inferenceStats.request(false, this.rowsOf(inputs), performance.now() - started, err)
      throw err
    } finally {
      release?.()
    }
  }

  /** How long a call may wait for its model to load: the request's deadline, else the runner's. */
  private callDeadline(now: number): number {
    return currentCall()?.deadline ?? now + resolveBatching(this.options).deadlineMs
  }

  /**
   * The refusal a request arriving now with this deadline and priority would get (undefined: it
   * would be queued). The server asks before reading a request's body, for the runners its API
   * is known to call: a refusal then costs no body read and no decoding. It counts as refused.
   */
  refusal(options: { deadline?: number | undefined; priority?: number | undefined } = {}): BundleError | undefined {
    return this.dispatcher?.refusal(1, options)
  }

  /** One frame of a sequence: one row, queued behind its sequence's earlier frames. */
  private async submitFrame(inputs: Inputs, frame: Required<SequenceFrame>): Promise<Outputs> {
    const waking = this.wake()
    if (waking) await waking
    const d = this.dispatcher
    if (!(d instanceof SequenceBatcher)) throw this.notRunning()
    const [inDim, outDim] = batchDims(this.options)
    const { wire, key } = frameRequest(this.name, inputs, d.spec, inDim)
    const call = currentCall()
    call?.uses?.add(this)
    const trace = CallTrace.start(this.name, 'run', 1)
    const out = await traced(trace, d.submit(wire, key, frame, { ...submitOptionsOf(call), trace }))
    return joinParts([out], outDim)
  }

  /** Rows a call carries, as the /v2 statistics count inferences: 1 for a model that runs requests as given. */
  private rowsOf(inputs: Inputs): number {
    const plan = this.running?.plan
    if (plan !== undefined && !plan.batched) return 1
    return Object.values(inputs)[0]?.shape[plan?.dims[0] ?? batchDims(this.options)[0]] ?? 0
  }

  private async submit(inputs: Inputs): Promise<Outputs> {
    const waking = this.wake()
    if (waking) await waking
    if (this.dispatcher === undefined) throw this.notRunning()
    // Unreachable (run() sends a sequence runner's calls to submitFrame, or refuses them): narrows the type.
    if (this.dispatcher instanceof SequenceBatcher)
      throw new BundleError('E_SEQUENCE_INVALID', `runner ${this.name} takes sequence frames only`)
    const plan = this.running!.plan
    const { wire, rows, key } = onnxRequest(this.name, inputs, plan)
    // The request this call serves lends its deadline and priority (and learns this runner).
    const call = currentCall()
    call?.uses?.add(this)
    const trace = CallTrace.start(this.name, 'run', rows)
    const parts = await traced(trace, this.dispatcher.submit(wire, rows, { ...submitOptionsOf(call), key, trace }))
    return joinParts(parts, plan.dims[1])
  }

  /** This runner's model as the Open Inference Protocol serves it (once started). */
  inference(): InferenceModel | undefined {
    if (this.model === undefined || this.signature === undefined || this.running === undefined) return undefined
    return inferenceModel({
      name: this.name,
      model: this.model,
      signature: this.signature,
      plan: this.running.plan,
      options: this.running.options ?? this.options,
      instances: () => this.pool?.size ?? this.running?.workers ?? RUNNER_DEFAULTS.workers,
      ready: () => this.ready(),
      run: (inputs, options) => this.run(inputs, options),
      stats: this.inferenceStats,
      pending: () => this.dispatcher?.stats().queuedRequests ?? 0,
      expectCall: () => this.expectCall(),
      sequence: this.running?.sequence,
    })
  }

  /** A sequence runner adds the sequences its workers hold (bundle_runner_sequences_active). */
  override health(): RunnerHealth {
    const d = this.dispatcher
    return {
      ...super.health(),
      ...(d instanceof SequenceBatcher ? { sequences: { active: d.active() } } : {}),
      ...(this.running?.gpus && this.loaded() ? { gpus: workersPerDevice(this.running.gpus) } : {}),
    }
  }

  /** Finishes what is queued (graceful shutdown loses nothing accepted), then stops the workers. */
  async stop(): Promise<void> {
    this.presence.stop()
    this.stopScaling?.()
    await this.dispatcher?.drain()
    await this.pool?.stop()
  }
}

export const onnxRunner = (tag: string, options: OnnxRunnerOptions = {}): OnnxRunner => new OnnxRunner(tag, options)
