import type { BundleError } from '../errors/index.js'
import type { DispatcherStats } from './batching/dispatcher.js'
import type { RunnerOverrides } from './config.js'
import type { RunnerMetrics } from './metrics.js'
import { isLocalPool, isRemotePool, type Pool } from './pool/pool.js'
import { RemotePool } from './remote/remote-pool.js'
import type { RemoteTarget } from './remote/target.js'
import { notRunning, trackRunner } from './registry.js'
import type { Runner, RunnerHealth, RunnerLog, RunnerRemote } from './runner.js'
import type { TraceCarrier } from './tracing/index.js'
import type { PoolOptions } from './pool/worker-pool.js'
import { logWorkerOutput, ortSeverity } from './pool/worker-output.js'

/** A batcher's load against a capacity of `slots` batches at once (Dispatcher.load). */
export interface LoadSource {
  load(slots?: number): { offeredPerSecond: number; ratio: number | undefined }
}

/**
 * The life every runner with workers shares, whatever runs in them (onnx, custom TypeScript):
 * its pool (local workers or remote ones through Redis), whether it ever started (a call to one
 * that never did means the service forgot to declare it), readiness and why not, restarts, and
 * running a remote worker's batch on its own workers. A new kind of runner extends this and
 * adds only what it does with a call.
 */
export abstract class PooledRunner implements Runner, RunnerRemote {
  abstract readonly kind: string
  /** The pool batches go to now (replaced by a version swap, cleared by an idle unload). */
  protected pool: Pool | undefined
  /** Set by the server before start: batches go to remote workers through Redis. */
  protected target: RemoteTarget | undefined
  protected metrics: RunnerMetrics | undefined
  protected log: RunnerLog | undefined
  /** Set by start(): a call before it means the service never declared this runner. */
  private everStarted = false
  /** Times the model was unloaded for idleness (a metric; only runners that unload count it). */
  get idleUnloads(): number {
    return 0
  }
  readonly remote: RunnerRemote = this

  constructor(readonly name: string) {
    trackRunner(this)
  }

  abstract start(): Promise<void>
  abstract stop(): Promise<void>
  abstract configure(overrides: RunnerOverrides): void
  abstract effectiveConfig(): Record<string, unknown>
  abstract queueDepth(): Record<string, number>
  abstract stats(): DispatcherStats | undefined

  /** Before start: this runner's batches run on remote workers (`bundle serve --runners remote`). */
  useRemote(target: RemoteTarget): void {
    this.target = target
  }

  /**
   * Runs one call (a formed batch for batchable methods) on this runner's own workers: what a remote worker does with a
   * job.
   */
  async execute(method: string, args: unknown, trace?: TraceCarrier[], _deadline?: number): Promise<unknown> {
    const waking = this.wake()
    if (waking) await waking
    return this.livePool().run(method, args, undefined, trace)
  }

  /** The content digest of the model it serves (remote workers check batches against it). */
  digest(): string | undefined {
    return undefined
  }

  /** Called by the server before start: batches, waits and rejections feed its /metrics. */
  attachMetrics(metrics: RunnerMetrics): void {
    this.metrics = metrics
  }

  /** Called by the server before start: what the runner reports goes to its log. */
  attachLog(log: RunnerLog): void {
    this.log = log
  }

  /** Where its workers' output goes: the attached log (worker-output.ts), else this process's stdout and stderr. */
  protected workerOutput(): PoolOptions['output'] {
    const log = this.log
    if (log === undefined) return undefined
    return {
      lines: logWorkerOutput(log, this.name),
      severity: ortSeverity(log.level, process.env.BUNDLE_ORT_LOG_LEVEL),
    }
  }

  ready(): boolean {
    return this.pool?.ready() ?? false
  }

  /** Why the runner cannot serve now, beyond starting (remote mode: Redis down, or no live worker). */
  notReadyReason(): string | undefined {
    return isRemotePool(this.pool) ? this.pool.notReadyReason() : this.target?.link.unavailable()
  }

  restarts(): number {
    return isLocalPool(this.pool) ? this.pool.restarts : 0
  }

  /** Live workers (the autoscaler changes it; in remote mode, the remote workers' heartbeats). */
  workerCount(): number {
    return this.pool?.size ?? 0
  }

  /** Remote mode: live remote workers, batches waiting for one, and the workers this replica's load needs (metrics). */
  remoteState(): { workers: number; queued: number; desiredWorkers: number } | undefined {
    if (!isRemotePool(this.pool)) return undefined
    const { workers, queued, slotsPerWorker, waiting = 0 } = this.pool.state()
    // The batchers share the workers: their loads, each in workers, add up.
    let desiredWorkers = 0
    let untimed = false
    for (const d of this.batchers()) {
      const l = d.load(slotsPerWorker ?? 1)
      if (l.ratio !== undefined) desiredWorkers += l.ratio
      else if (l.offeredPerSecond > 0) untimed = true
    }
    // Rows offered before any batch was timed (workers scaled to zero from the start), or a batch
    // still waiting with no worker live however long ago it came: at least one worker is needed.
    if (untimed || (workers === 0 && waiting > 0)) desiredWorkers = Math.max(desiredWorkers, 1)
    return { workers, queued, desiredWorkers }
  }

  /** The batchers in front of the pool, whose offered load and latency model say what the workers carry. */
  protected batchers(): Iterable<LoadSource> {
    return []
  }

  /** Whether the model is in memory now (false before start, while unloaded for idleness). */
  loaded(): boolean {
    return this.pool !== undefined
  }

  health(): RunnerHealth {
    const remote = this.remoteState()
    return {
      loaded: this.loaded(),
      idleUnloads: this.idleUnloads,
      workers: this.workerCount(),
      restarts: this.restarts(),
      ...(remote ? { remote } : {}),
    }
  }

  /**
   * Before a call reaches the pool: a promise while it must wait (an idle-unloaded model loads
   * again), else nothing — no promise hop, so a call made before stop() is queued before it.
   */
  protected wake(): Promise<void> | undefined {
    return undefined
  }

  protected markStarted(): void {
    this.everStarted = true
  }

  /** The error for a call while there is no pool: never started (undeclared) or stopped. */
  protected notRunning(): BundleError {
    return notRunning(this.name, this.everStarted)
  }

  protected livePool(): Pool {
    if (this.pool === undefined) throw this.notRunning()
    return this.pool
  }

  /**
   * A request that will call this runner arrived while the server had nothing else in flight:
   * its local workers, idle, stay awake for the call (runners/pool/hot-wait.ts).
   */
  expectCall(): void {
    if (isLocalPool(this.pool)) this.pool.wake?.(this.callsPinned())
  }

  /** Whether this runner's calls go to a worker of their own choosing (a sequence's state), not the first idle. */
  protected callsPinned(): boolean {
    return false
  }

  /** The pool of a runner in remote mode: its batches become jobs on its queue in Redis. */
  protected remotePool(
    target: RemoteTarget,
    o: { timeoutMs: number; digest?: string; onCapacity: (slots: number) => void },
  ): RemotePool {
    return new RemotePool({
      link: target.link,
      queue: target.queue,
      runner: this.name,
      ...o,
      ...(target.graceMs !== undefined ? { graceMs: target.graceMs } : {}),
    })
  }
}
