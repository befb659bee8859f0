import { fileURLToPath } from 'node:url'
import { BundleError } from '../errors/index.js'
import { Dispatcher, type DispatcherStats } from './batching/dispatcher.js'
import { mergeOverrides, type RunnerOverrides } from './config.js'
import { WorkerPool } from './pool/worker-pool.js'
import type { BackendSpec } from './pool/protocol.js'
import { currentCall, submitOptionsOf } from './call-context.js'
import { type LoadSource, PooledRunner } from './pooled-runner.js'
import { tracesOf } from './onnx/batch.js'
import { CallTrace, carrierOf, spanAround, traced } from './tracing/index.js'
import { isRemotePool, startPool } from './pool/pool.js'
import {
  customSettings,
  type CustomRunnerOptions,
  type CustomSettings,
  type MethodBatching,
} from './custom/settings.js'

/** A backend runner's options: its name, workers, and which methods batch (as a custom runner's). */
export type BackendRunnerOptions = CustomRunnerOptions

/** A backend module and its options, as a service names it (see runners/pool/backend.ts). */
export interface BackendSource {
  /** The runner's kind, as GET /runners and metrics show it (e.g. 'tflite'). */
  kind: string
  /** The backend module's file: an absolute path or a file URL. */
  module: string | URL
  /** Handed to the module's `load(options)` in each worker (structured-cloneable). */
  options?: unknown
}

/**
 * A runner of any kind whose workers load a backend module (runners/pool/backend.ts): methods
 * called by name, each either called as is (`call`) or batched across concurrent calls
 * (`batch`, per `methods`). Custom runners are this with the custom backend; a new kind of runner
 * is a backend module and `backendRunner(...)`, without a change here.
 *
 * @example
 * const tfl = backendRunner(
 *   { kind: 'tflite', module: new URL('./tflite-backend.ts', import.meta.url), options: { model: 'm.tflite' } },
 *   { name: 'classifier', methods: { classify: { batchable: true } } },
 * )
 * const [label] = await tfl.batch<Float32Array, string>('classify', [pixels])
 */
export class BackendRunner extends PooledRunner {
  readonly kind: string
  private readonly dispatchers = new Map<string, Dispatcher<unknown[], unknown[]>>()
  /** Per batchable method: what the server asks before reading a request's body (see OnnxRunner.refusal). */
  private readonly refusers = new Map<
    string,
    {
      refusal(o: { deadline?: number | undefined; priority?: number | undefined }): BundleError | undefined
      expectCall(): void
    }
  >()
  /** What a plain call() records in the request's context: it refuses nothing, it only hears of lone requests. */
  private readonly caller = { expectCall: () => this.expectCall() }
  /** The operator's overrides (serve config file, environment), layered as configure() receives them. */
  private overrides: RunnerOverrides = {}
  /** What the running workers were started with (workers: 0 when they are remote). */
  private running: CustomSettings | undefined

  constructor(
    protected readonly source: BackendSource,
    private readonly options: CustomRunnerOptions,
  ) {
    super(options.name)
    this.kind = source.kind
  }

  /** What its workers load. */
  protected backend(): BackendSpec {
    const module = this.source.module instanceof URL ? fileURLToPath(this.source.module) : this.source.module
    return { module, ...(this.source.options !== undefined ? { options: this.source.options } : {}) }
  }

  /** How GET /runners names what runs (before the settings). */
  protected describe(): Record<string, unknown> {
    return { kind: this.kind, name: this.name, module: this.backend().module }
  }

  configure(overrides: RunnerOverrides): void {
    this.overrides = mergeOverrides(this.overrides, overrides)
  }

  /** Once started, what the running workers and batchers use; before, what start() would use. */
  effectiveConfig(): Record<string, unknown> {
    return { ...this.describe(), ...(this.running ?? customSettings(this.options, this.overrides)) }
  }

  queueDepth(): Record<string, number> {
    return Object.fromEntries([...this.dispatchers].map(([m, d]) => [m, d.stats().queuedRows]))
  }

  /** Replicas' worth of work offered to its busiest method (bundle_desired_replicas). */
  loadRatio(): number | undefined {
    // Batches on remote workers measure the workers, not this replica (bundle_runner_desired_workers).
    if (isRemotePool(this.pool)) return undefined
    let most: number | undefined
    for (const d of this.dispatchers.values()) {
      const r = d.load().ratio
      if (r !== undefined) most = Math.max(most ?? 0, r)
    }
    return most
  }

  protected override batchers(): Iterable<LoadSource> {
    return this.dispatchers.values()
  }

  /** Per-method batchers have no single state to show. */
  stats(): DispatcherStats | undefined {
    return undefined
  }

  async start(): Promise<void> {
    this.markStarted()
    const settings = customSettings(this.options, this.overrides)
    const target = this.target
    const depth = target ? 1 : settings.batchesPerWorker
    this.pool = target
      ? this.remotePool(target, {
          timeoutMs: settings.timeoutMs,
          onCapacity: (slots) => {
            for (const d of this.dispatchers.values()) d.setSlots(slots)
          },
        })
      : new WorkerPool({
          runner: this.name,
          workers: settings.workers,
          isolation: settings.isolation,
          depth,
          timeoutMs: settings.timeoutMs,
          output: this.workerOutput(),
          backend: this.backend(),
        })
    await startPool(this.pool)
    this.running = target ? { ...settings, workers: 0 } : settings
    const slots = target ? Math.max(1, this.pool.size) : settings.workers
    for (const [method, m] of Object.entries(settings.methods)) if (m.batchable) this.batcher(method, m, slots, depth)
  }

  /** A batchable method's batcher: concurrent calls' items become one call of the method. */
  private batcher(method: string, m: MethodBatching, slots: number, depth: number): void {
    const { batchable: _, ...batching } = m
    this.refusers.set(method, {
      refusal: (o) => this.dispatchers.get(method)?.refusal(1, o),
      expectCall: () => this.expectCall(),
    })
    const observer = this.metrics?.observer(this.name, method)
    const d = new Dispatcher<unknown[], unknown[]>(
      { ...batching, slots, depth, ...(observer ? { observer } : {}) },
      async (slices, _rows, report) => {
        const items = slices.flatMap((s) => s.payload.slice(s.start, s.start + s.rows))
        const out = (await this.livePool().run(method, items, report, tracesOf(slices))) as unknown[]
        if (!Array.isArray(out) || out.length !== items.length)
          throw new BundleError(
            'E_INTERNAL',
            `runner ${this.name}: batchable method ${method} must return one result per item`,
          )
        let at = 0
        return slices.map((s) => out.slice(at, (at += s.rows)))
      },
    )
    this.dispatchers.set(method, d)
  }

  /** Calls a method once with `args` (no batching). */
  async call<T = unknown>(method: string, args?: unknown): Promise<T> {
    currentCall()?.uses?.add(this.caller)
    const span = spanAround(() => ({
      name: `${this.name}.${method}`,
      attributes: { 'bundle.runner': this.name, 'bundle.runner.method': method },
    }))
    if (span === undefined) return (await this.livePool().run(method, args)) as T
    // The worker's execute span joins this one.
    return (await span.run(() => this.livePool().run(method, args, undefined, [carrierOf(span.span)]))) as T
  }

  /** Sends `items` through a batchable method; concurrent calls are merged into batches. */
  async batch<I, O>(method: string, items: I[]): Promise<O[]> {
    if (this.pool === undefined) throw this.notRunning()
    const d = this.dispatchers.get(method)
    if (d === undefined)
      throw new BundleError(
        'E_SERVICE_DEFINITION',
        `runner ${this.name}: ${method} is not declared batchable (methods: { ${method}: { batchable: true } })`,
      )
    if (items.length === 0) return []
    const call = currentCall()
    // The server asks this method's batcher, not the whole runner, before it reads the next body.
    call?.uses?.add(this.refusers.get(method)!)
    const options = submitOptionsOf(call)
    const trace = CallTrace.start(this.name, method, items.length)
    if (trace) options.trace = trace
    return ((await traced(trace, d.submit(items, items.length, options))) as O[][]).flat()
  }

  /** Finishes what is queued (graceful shutdown loses nothing accepted), then stops the workers. */
  async stop(): Promise<void> {
    await Promise.all([...this.dispatchers.values()].map((d) => d.drain()))
    await this.pool?.stop()
  }
}

/** A runner whose workers load the backend module `source.module` (see BackendRunner). */
export const backendRunner = (source: BackendSource, options: BackendRunnerOptions): BackendRunner =>
  new BackendRunner(source, options)
