import { fileURLToPath } from 'node:url'
import { BundleError } from '../errors/index.js'
import { Dispatcher, type DispatcherStats } from './batching/dispatcher.js'
import { mergeOverrides, type RunnerOverrides } from './config.js'
import { WorkerPool } from './pool/worker-pool.js'
import { currentCall, submitOptionsOf } from './call-context.js'
import { PooledRunner } from './pooled-runner.js'
import { tracesOf } from './onnx/batch.js'
import { CallTrace, carrierOf, spanAround, traced } from './tracing/index.js'
import { startPool } from './pool/pool.js'
import {
  customSettings,
  type CustomRunnerOptions,
  type CustomSettings,
  type MethodBatching,
} from './custom/settings.js'

export type { CustomMethodOptions, CustomRunnerOptions } from './custom/settings.js'

/**
 * Arbitrary TypeScript (pre/post-processing, non-ONNX models) in worker processes. The module
 * is loaded in the worker, so it is named by path (or URL) and export, not passed as a value.
 *
 * @example
 * const tok = customRunner(
 *   { module: new URL('./tokenizer.ts', import.meta.url), export: 'Tokenizer' },
 *   { name: 'tokenizer', methods: { encode: { batchable: true } } },
 * )
 * const [ids] = await tok.batch<string, number[]>('encode', ['hello'])
 */
export class CustomRunner extends PooledRunner {
  readonly kind = 'custom' as const
  private readonly dispatchers = new Map<string, Dispatcher<unknown[], unknown[]>>()
  /** Per batchable method: what the server asks before reading a request's body (see OnnxRunner.refusal). */
  private readonly refusers = new Map<
    string,
    { refusal(o: { deadline?: number | undefined; priority?: number | undefined }): BundleError | undefined }
  >()
  /** The operator's overrides (serve config file, environment), layered as configure() receives them. */
  private overrides: RunnerOverrides = {}
  /** What the running workers were started with (workers: 0 when they are remote). */
  private running: CustomSettings | undefined

  constructor(
    private readonly source: { module: string | URL; export: string },
    private readonly options: CustomRunnerOptions,
  ) {
    super(options.name)
  }

  configure(overrides: RunnerOverrides): void {
    this.overrides = mergeOverrides(this.overrides, overrides)
  }

  /** Once started, what the running workers and batchers use; before, what start() would use. */
  effectiveConfig(): Record<string, unknown> {
    return {
      kind: this.kind,
      name: this.name,
      module: String(this.source.module),
      export: this.source.export,
      ...(this.running ?? customSettings(this.options, this.overrides)),
    }
  }

  queueDepth(): Record<string, number> {
    return Object.fromEntries([...this.dispatchers].map(([m, d]) => [m, d.stats().queuedRows]))
  }

  /** Per-method batchers have no single state to show. */
  stats(): DispatcherStats | undefined {
    return undefined
  }

  async start(): Promise<void> {
    this.markStarted()
    const settings = customSettings(this.options, this.overrides)
    const module = this.source.module instanceof URL ? fileURLToPath(this.source.module) : this.source.module
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
          backend: { kind: 'custom', module, exportName: this.source.export },
        })
    await startPool(this.pool)
    this.running = target ? { ...settings, workers: 0 } : settings
    const slots = target ? Math.max(1, this.pool.size) : settings.workers
    for (const [method, m] of Object.entries(settings.methods)) if (m.batchable) this.batcher(method, m, slots, depth)
  }

  /** A batchable method's batcher: concurrent calls' items become one call of the method. */
  private batcher(method: string, m: MethodBatching, slots: number, depth: number): void {
    const { batchable: _, ...batching } = m
    this.refusers.set(method, { refusal: (o) => this.dispatchers.get(method)?.refusal(1, o) })
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

export const customRunner = (
  source: { module: string | URL; export: string },
  options: CustomRunnerOptions,
): CustomRunner => new CustomRunner(source, options)
