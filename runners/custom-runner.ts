import { fileURLToPath } from 'node:url'
import { BundleError } from '../errors/index.js'
import { Dispatcher } from './batching/dispatcher.js'
import type { RunnerOverrides } from './config.js'
import type { RunnerMetrics } from './metrics.js'
import { WorkerPool } from './pool/worker-pool.js'
import { isLocalPool } from './pool/pool.js'
import { RemotePool } from './remote/remote-pool.js'
import type { RemoteTarget } from './remote/target.js'
import { currentCall } from './call-context.js'
import { resolveBatching, RUNNER_DEFAULTS } from './defaults.js'
import { notRunning, trackRunner } from './registry.js'

export interface CustomMethodOptions {
  /** The worker method takes an array of items and returns one result per item, in order. */
  batchable?: boolean
  maxBatchSize?: number
  /** The batch window (default 10 ms): see onnxRunner's batching.maxDelayMs. */
  maxDelayMs?: number
  /** Queue plus run per call (default the runner's deadlineMs, else 10 000 ms). */
  deadlineMs?: number
  /** Calls that may wait at once (default 64 × maxBatchSize); past it a call is refused at once. */
  maxQueueSize?: number
  /** @deprecated the deadline's old name: use deadlineMs. */
  maxLatencyMs?: number
}

export interface CustomRunnerOptions {
  name: string
  workers?: number
  timeoutMs?: number
  /** Queue plus run for batched calls (default 10 000 ms); a method's own deadlineMs wins. */
  deadlineMs?: number
  /** Calls handed to each worker at once (default 2); the worker runs them one after the other. */
  batchesPerWorker?: number
  /** Methods to batch; every other method is called as is. */
  methods?: Record<string, CustomMethodOptions>
}

/**
 * Arbitrary TypeScript (pre/post-processing, non-ONNX models) in worker processes. The module
 * is loaded in the worker, so it is named by path (or URL) and export, not passed as a value.
 *
 * @example
 * const tok = customRunner({ module: new URL('./tokenizer.ts', import.meta.url), export: 'Tokenizer' }, { name: 'tokenizer', methods: { encode: { batchable: true } } })
 * const [ids] = await tok.batch<string, number[]>('encode', ['hello'])
 */
export class CustomRunner {
  readonly name: string
  private pool: WorkerPool | RemotePool | undefined
  private remote: RemoteTarget | undefined
  private readonly dispatchers = new Map<string, Dispatcher<unknown[], unknown[]>>()
  /** Per batchable method: what the server asks before reading a request's body (see OnnxRunner.refusal). */
  private readonly refusers = new Map<string, { refusal(o: { deadline?: number | undefined; priority?: number | undefined }): BundleError | undefined }>()
  private metrics: RunnerMetrics | undefined

  configure(overrides: RunnerOverrides): void {
    const deadlineMs = overrides.deadlineMs ?? overrides.batching?.maxLatencyMs
    this.options = {
      ...this.options,
      ...(overrides.workers ? { workers: overrides.workers } : {}),
      ...(overrides.timeoutMs ? { timeoutMs: overrides.timeoutMs } : {}),
      ...(overrides.batchesPerWorker ? { batchesPerWorker: overrides.batchesPerWorker } : {}),
      ...(deadlineMs ? { deadlineMs } : {}),
    }
    const b = overrides.batching
    if (b || deadlineMs) {
      // An operator's setting applies to every batchable method, over what the code says.
      this.options.methods = Object.fromEntries(
        Object.entries(this.options.methods ?? {}).map(([m, o]) => [
          m,
          o.batchable
            ? { ...o, ...(b?.maxBatchSize ? { maxBatchSize: b.maxBatchSize } : {}), ...(b?.maxDelayMs !== undefined ? { maxDelayMs: b.maxDelayMs } : {}), ...(b?.maxQueueSize ? { maxQueueSize: b.maxQueueSize } : {}), ...(deadlineMs ? { deadlineMs, maxLatencyMs: undefined } : {}), ...(b?.enabled === false ? { batchable: false } : {}) }
            : o,
        ]),
      )
    }
  }

  effectiveConfig(): Record<string, unknown> {
    return { kind: 'custom', module: String(this.source.module), export: this.source.export, workers: RUNNER_DEFAULTS.workers, timeoutMs: RUNNER_DEFAULTS.timeoutMs, batchesPerWorker: RUNNER_DEFAULTS.batchesPerWorker, ...this.options }
  }

  attachMetrics(metrics: RunnerMetrics): void {
    this.metrics = metrics
  }

  queueDepth(): Record<string, number> {
    return Object.fromEntries([...this.dispatchers].map(([m, d]) => [m, d.stats().queuedRows]))
  }

  restarts(): number {
    return isLocalPool(this.pool) ? this.pool.restarts : 0
  }

  constructor(
    private readonly source: { module: string | URL; export: string },
    private options: CustomRunnerOptions,
  ) {
    this.name = options.name
    trackRunner(this)
  }

  /** Set by start(): a call before it means the service never declared this runner. */
  private everStarted = false

  /** Before start: this runner's calls run on remote workers (`bundle serve --runners remote`). */
  useRemote(target: RemoteTarget): void {
    this.remote = target
  }

  /** Runs one call (a formed batch for batchable methods) on this runner's own workers: what a remote worker does with a job. */
  execute(method: string, args: unknown): Promise<unknown> {
    if (this.pool === undefined) return Promise.reject(notRunning(this.name, this.everStarted))
    return this.pool.run(method, args)
  }

  /** Remote mode: live remote workers and batches waiting for one (metrics). */
  remoteState(): { workers: number; queued: number } | undefined {
    return this.pool instanceof RemotePool ? this.pool.state() : undefined
  }

  /** Why the runner cannot serve now, beyond starting (remote mode: Redis down, or no live worker). */
  notReadyReason(): string | undefined {
    return this.pool instanceof RemotePool ? this.pool.notReadyReason() : this.remote?.link.unavailable()
  }

  async start(): Promise<void> {
    this.everStarted = true
    const module = this.source.module instanceof URL ? fileURLToPath(this.source.module) : this.source.module
    const workers = this.options.workers ?? RUNNER_DEFAULTS.workers
    const timeoutMs = this.options.timeoutMs ?? RUNNER_DEFAULTS.timeoutMs
    const depth = this.remote ? 1 : (this.options.batchesPerWorker ?? RUNNER_DEFAULTS.batchesPerWorker)
    this.pool = this.remote
      ? new RemotePool({ link: this.remote.link, queue: this.remote.queue, runner: this.name, timeoutMs, ...(this.remote.graceMs !== undefined ? { graceMs: this.remote.graceMs } : {}), onCapacity: (slots) => this.dispatchers.forEach((d) => d.setSlots(slots)) })
      : new WorkerPool({ runner: this.name, workers, depth, timeoutMs, backend: { kind: 'custom', module, exportName: this.source.export } })
    try {
      await this.pool.start()
    } catch (err) {
      await this.pool.stop(0) // no worker keeps restarting behind a runner that failed to start
      throw err
    }
    const slots = this.pool instanceof RemotePool ? Math.max(1, this.pool.size) : workers
    for (const [method, m] of Object.entries(this.options.methods ?? {})) {
      if (!m.batchable) continue
      this.refusers.set(method, { refusal: (o) => this.dispatchers.get(method)?.refusal(1, o) })
      this.dispatchers.set(
        method,
        new Dispatcher<unknown[], unknown[]>({ ...resolveMethod(m, this.options), slots, depth, ...(this.metrics ? { observer: this.metrics.observer(this.name, method) } : {}) }, async (slices, _rows, report) => {
          const items = slices.flatMap((s) => s.payload.slice(s.start, s.start + s.rows))
          const pool = this.pool!
          const out = (await (pool instanceof WorkerPool ? pool.run(method, items, report) : pool.run(method, items))) as unknown[]
          if (!Array.isArray(out) || out.length !== items.length) throw new BundleError('E_INTERNAL', `runner ${this.name}: batchable method ${method} must return one result per item`)
          let at = 0
          return slices.map((s) => out.slice(at, (at += s.rows)))
        }),
      )
    }
  }

  ready(): boolean {
    return this.pool?.ready() ?? false
  }

  /** Calls a method once with `args` (no batching). */
  async call<T = unknown>(method: string, args?: unknown): Promise<T> {
    if (this.pool === undefined) throw notRunning(this.name, this.everStarted)
    return (await this.pool.run(method, args)) as T
  }

  /** Sends `items` through a batchable method; concurrent calls are merged into batches. */
  async batch<I, O>(method: string, items: I[]): Promise<O[]> {
    if (this.pool === undefined) throw notRunning(this.name, this.everStarted)
    const d = this.dispatchers.get(method)
    if (d === undefined) throw new BundleError('E_SERVICE_DEFINITION', `runner ${this.name}: ${method} is not declared batchable (methods: { ${method}: { batchable: true } })`)
    if (items.length === 0) return []
    const call = currentCall()
    // The server asks this method's batcher, not the whole runner, before it reads the next body.
    call?.uses?.add(this.refusers.get(method)!)
    return ((await d.submit(items, items.length, call ? { deadline: call.deadline, priority: call.priority, gone: call.gone, timing: call.timing } : {})) as O[][]).flat()
  }

  /** Finishes what is queued (graceful shutdown loses nothing accepted), then stops the workers. */
  async stop(): Promise<void> {
    await Promise.all([...this.dispatchers.values()].map((d) => d.drain()))
    await this.pool?.stop()
  }
}

/** A batchable method's batching: its own settings, then the runner's, then the defaults. */
function resolveMethod(m: CustomMethodOptions, r: CustomRunnerOptions): { maxBatchSize: number; maxDelayMs: number; deadlineMs: number; maxQueueSize: number } {
  const b = resolveBatching({ deadlineMs: m.deadlineMs ?? m.maxLatencyMs ?? r.deadlineMs, batching: { maxBatchSize: m.maxBatchSize, maxDelayMs: m.maxDelayMs, maxQueueSize: m.maxQueueSize } })
  return { maxBatchSize: b.maxBatchSize, maxDelayMs: b.maxDelayMs, deadlineMs: b.deadlineMs, maxQueueSize: b.maxQueueSize }
}

export const customRunner = (source: { module: string | URL; export: string }, options: CustomRunnerOptions): CustomRunner => new CustomRunner(source, options)
