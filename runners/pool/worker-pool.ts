import { BundleError, ignore } from '../../errors/index.js'
import { workerTitle, type BackendSpec } from './protocol.js'
import { hotWaitMs } from './hot-wait.js'
import { shmDir, shmMinBytes } from './shm.js'
import type { LocalPool } from './pool.js'
import { PoolWorker, type Call, type Warmup } from './pool-worker.js'
import { transportFor, type Isolation } from './transport.js'
import type { WorkerOutput } from './worker-output.js'
import type { TraceCarrier } from '../tracing/index.js'

export type { Warmup } from './pool-worker.js'

export interface PoolOptions {
  runner: string
  workers: number
  backend: BackendSpec
  /** Where workers run: child processes (default; crash isolation) or threads of this process. */
  isolation?: Isolation
  /** A call running longer than this fails with E_RUNNER_TIMEOUT and its worker is replaced. */
  timeoutMs?: number
  /**
   * Calls handed to one worker at once (default 1). With 2, the next batch is already in the
   * worker when the current one ends, so the worker never waits for this process to take its
   * answer and send more — which, when this process's event loop is busy, can take longer than
   * the batch itself. The worker runs its calls one after the other.
   */
  depth?: number
  /** Extra environment per worker (GPU placement sets CUDA_VISIBLE_DEVICES here). */
  env?: (index: number) => Record<string, string>
  /** Restart delay after a crash: doubles from min to max while crashes keep coming. */
  backoffMs?: { min: number; max: number }
  onEvent?: (e: { type: 'crash' | 'restart' | 'timeout'; index: number; detail: string }) => void
  /** Dummy calls every worker runs before it counts as ready (after each restart too). */
  warmup?: Warmup
  /**
   * Where the workers' stdout and stderr lines go, one call per line (worker-output.ts logs
   * them); unset, they go to this process's own. `severity` is onnxruntime's least severe level
   * written (0 verbose … 4 fatal; default 2, warning).
   */
  output?: { lines: WorkerOutput; severity: number }
  /**
   * Whether this process may stay awake for a lone request's answer (hot-wait.ts; default yes).
   * Not when the workers' threads take every core: the spin would take one from the model.
   */
  answerAwake?: boolean
}

/** A place for one worker: it keeps its index and backoff across the worker's restarts. */
interface Slot {
  index: number
  worker?: PoolWorker | undefined
  backoff: number
  /** Added by grow() and not ready yet: does not make the pool unready. */
  growing?: boolean
  /** Being removed by shrink(): takes no calls, is not restarted. */
  retiring?: boolean
  /** Calls for this worker only (runOn), waiting for it to take one. */
  pinned: Call[]
}

/**
 * N workers for one runner, each a PoolWorker (a child process, or a thread with
 * isolation: 'thread'). This class only schedules: calls go to the ready worker with the fewest
 * in hand (FIFO when all are full), a worker that dies fails what it held at once with
 * E_RUNNER_CRASHED and comes back after a backoff, and a call past timeoutMs fails with
 * E_RUNNER_TIMEOUT while its worker is replaced at once.
 */
export class WorkerPool implements LocalPool {
  readonly kind: Isolation
  /** Batches reach a worker as pieces (written straight into its shared memory, or joined once). */
  readonly gathers = true
  readonly depth: number
  restarts = 0
  private readonly slots: Slot[]
  private readonly waiting: Call[] = []
  private nextId = 1
  private stopping = false
  private readonly shmDir: string | undefined
  private readonly shmMinBytes: number | undefined
  private readonly hotWaitMs = hotWaitMs()
  private readonly backoffMin: number

  constructor(private readonly options: PoolOptions) {
    this.kind = options.isolation ?? 'process'
    this.depth = Math.max(1, options.depth ?? 1)
    this.backoffMin = options.backoffMs?.min ?? 100
    // Threads share this process's memory: messages move their buffers, no file in between.
    this.shmDir = this.kind === 'process' ? shmDir() : undefined
    this.shmMinBytes = this.shmDir === undefined ? undefined : shmMinBytes()
    this.slots = Array.from({ length: options.workers }, (_, index) => ({
      index,
      backoff: this.backoffMin,
      pinned: [],
    }))
  }

  /**
   * A lone request that will call this runner arrived: the idle worker its call will go to (the
   * first, as pump picks) stays awake for it. Only that one: another awake worker would spin on a
   * core the request's decoding or the model wants. `every`: calls pinned to a worker (a sequence's
   * frames go to the worker holding its state), which one is not known yet: all idle ones.
   */
  wake(every = false): void {
    const idle = this.slots.filter((s) => !s.retiring && s.worker?.state === 'ready' && s.worker.calls.size === 0)
    for (const s of every ? idle : idle.slice(0, 1)) s.worker?.wake(this.hotWaitMs)
  }

  /** Starts every worker; resolves when all are ready, rejects if one cannot load its backend. */
  async start(): Promise<void> {
    await Promise.all(this.slots.map((s) => this.spawn(s)))
  }

  ready(): boolean {
    return !this.stopping && this.slots.every((s) => s.growing || s.worker?.state === 'ready')
  }

  notReadyReason(): string | undefined {
    return undefined
  }

  /** Live workers (starting ones included, retiring ones not). */
  get size(): number {
    return this.slots.filter((s) => !s.retiring).length
  }

  /** Adds a worker; resolves once it is ready (warmed). The pool stays ready meanwhile. */
  async grow(): Promise<void> {
    const slot: Slot = {
      index: Math.max(-1, ...this.slots.map((s) => s.index)) + 1,
      backoff: this.backoffMin,
      growing: true,
      pinned: [],
    }
    this.slots.push(slot)
    try {
      await this.spawn(slot)
    } catch (err) {
      slot.retiring = true
      this.slots.splice(this.slots.indexOf(slot), 1)
      slot.worker?.kill()
      throw err
    } finally {
      slot.growing = false
    }
  }

  /** Removes one worker (an idle one if there is one) once the calls it holds are done. */
  async shrink(): Promise<void> {
    const live = this.slots.filter((s) => !s.retiring)
    if (live.length <= 1) return
    const slot = live.find((s) => s.worker?.state === 'ready' && s.worker.calls.size === 0) ?? live[live.length - 1]!
    slot.retiring = true
    await slot.worker?.idle()
    this.slots.splice(this.slots.indexOf(slot), 1)
    await slot.worker?.shutDown()
  }

  /** The workers' process ids (a thread's is this process's). */
  pids(): number[] {
    return this.slots.flatMap((s) => (s.worker?.pid !== undefined && s.worker.state !== 'down' ? [s.worker.pid] : []))
  }

  /** Starts the worker of `slot`; resolves when it is ready. Its exit schedules the next one. */
  private spawn(slot: Slot): Promise<void> {
    const out = this.options.output
    const env = {
      ...this.options.env?.(slot.index),
      ...(out ? { BUNDLE_ORT_LOG_SEVERITY: String(out.severity) } : {}),
    }
    const lines = out && ((line: string, stream: 'stdout' | 'stderr') => out.lines(line, stream, slot.index))
    const worker = new PoolWorker({
      runner: this.options.runner,
      index: slot.index,
      backend: this.options.backend,
      transport: transportFor(this.kind)(workerTitle(this.options.runner, slot.index), env, lines),
      shmDir: this.shmDir,
      shmMinBytes: this.shmMinBytes,
      thread: this.kind === 'thread',
      timeoutMs: this.options.timeoutMs,
      hotWaitMs: this.options.answerAwake === false ? 0 : this.hotWaitMs,
      warmup: this.options.warmup,
      onFree: () => this.pump(),
    })
    slot.worker = worker
    void worker.exited.then(({ detail, timedOut }) => this.onExit(slot, worker, detail, timedOut))
    return worker.started.then(() => {
      slot.backoff = this.backoffMin
      this.pump()
    })
  }

  private onExit(slot: Slot, worker: PoolWorker, detail: string, timedOut: boolean): void {
    if (slot.worker === worker) {
      // A call pinned to a worker is meant for what that worker holds (a sequence's state):
      // its replacement holds none of it.
      for (const call of slot.pinned.splice(0))
        call.reject(
          new BundleError(
            'E_RUNNER_CRASHED',
            `runner ${this.options.runner} worker #${slot.index} ${detail} before it ran ${call.method}`,
          ),
        )
    }
    if (this.stopping || slot.retiring || slot.worker !== worker) return
    this.options.onEvent?.({ type: timedOut ? 'timeout' : 'crash', index: slot.index, detail })
    const delay = timedOut ? 0 : slot.backoff
    slot.backoff = Math.min(slot.backoff * 2, this.options.backoffMs?.max ?? 5_000)
    setTimeout(() => {
      if (this.stopping || slot.retiring) return
      this.restarts++
      this.options.onEvent?.({ type: 'restart', index: slot.index, detail: `after ${delay} ms` })
      this.spawn(slot).catch(ignore('a failed restart exits and schedules the next one'))
    }, delay).unref()
  }

  /**
   * Runs `method` on a ready worker; args and results may hold typed arrays (sent as bytes).
   * `timing` is told how long the call ran inside the worker.
   */
  run(method: string, args: unknown, timing?: (ms: number) => void, trace?: TraceCarrier[]): Promise<unknown> {
    if (this.stopping)
      return Promise.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} is stopping`))
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, method, args, timing, trace, resolve, reject })
      this.pump()
    })
  }

  /**
   * Runs `method` on worker `index` only, whatever the others hold: for calls that need what
   * that worker keeps between calls (a sequence's state). While it restarts the call waits for
   * it; calls handed to it before a crash fail with the crash (E_RUNNER_CRASHED).
   */
  runOn(
    index: number,
    method: string,
    args: unknown,
    timing?: (ms: number) => void,
    trace?: TraceCarrier[],
  ): Promise<unknown> {
    if (this.stopping)
      return Promise.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} is stopping`))
    const slot = this.slots.find((s) => s.index === index && !s.retiring)
    if (slot === undefined)
      return Promise.reject(
        new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} has no worker #${index}`),
      )
    return new Promise((resolve, reject) => {
      slot.pinned.push({ id: this.nextId++, method, args, timing, trace, resolve, reject })
      this.pump()
    })
  }

  /** Indexes of the workers that take calls now (not starting, restarting or retiring). */
  readyWorkers(): number[] {
    return this.slots.flatMap((s) => (s.worker?.state === 'ready' && !s.retiring ? [s.index] : []))
  }

  /** Hands waiting calls to the ready workers with the fewest calls in hand, up to `depth` each. */
  private pump(): void {
    // Pinned calls first: they can go nowhere else.
    for (const slot of this.slots) {
      const w = slot.worker
      while (slot.pinned.length > 0 && w !== undefined && w.state === 'ready' && w.calls.size < this.depth)
        w.send(slot.pinned.shift()!)
    }
    while (this.waiting.length > 0) {
      let best: PoolWorker | undefined
      for (const slot of this.slots) {
        const w = slot.worker
        if (w === undefined || w.state !== 'ready' || slot.retiring || w.calls.size >= this.depth) continue
        if (best === undefined || w.calls.size < best.calls.size) best = w
      }
      if (best === undefined) return
      best.send(this.waiting.shift()!)
    }
  }

  /** Fails queued calls, lets running ones finish (up to graceMs), then stops every worker. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true
    for (const call of [...this.waiting.splice(0), ...this.slots.flatMap((s) => s.pinned.splice(0))])
      call.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} is stopping`))
    let timer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))
    await Promise.race([Promise.all(this.slots.map((s) => s.worker?.idle())), grace])
    clearTimeout(timer)
    await Promise.all(this.slots.map((s) => s.worker?.shutDown()))
  }
}
