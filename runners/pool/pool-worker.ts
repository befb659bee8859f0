import { BundleError, errorFromWire, ignore } from '../../errors/index.js'
import {
  isGathered,
  joined,
  type BackendSpec,
  type ParentMessage,
  type ShmSlot,
  type WorkerMessage,
} from './protocol.js'
import { activeTracing, type TraceCarrier } from '../tracing/index.js'
import { HOT_ANSWER_MAX_MS, HotWait, requestsInFlight } from './hot-wait.js'
import { ShmChannel } from './shm.js'
import type { Transport } from './transport.js'

/** One call on its way to a worker and back. */
export interface Call {
  id: number
  method: string
  args: unknown
  /** Told how long the call ran inside the worker. */
  timing?: ((ms: number) => void) | undefined
  /** The traced requests it serves (see ParentMessage 'run'). */
  trace?: TraceCarrier[] | undefined
  /** The part of the worker's shared-memory file its tensors use (one per call in flight). */
  region?: number
  resolve: (v: unknown) => void
  reject: (e: unknown) => void
  timer?: NodeJS.Timeout
}

/** One warm-up call: run `untimed` times (lazy initialisation), then `timed` times, timed. */
export interface WarmupStep {
  /** Rows the call carries: the batcher's latency model learns batch times by it. */
  rows: number
  args: () => unknown
  untimed: number
  timed: number
}

/**
 * Warm-up: the steps in order, before a worker reports ready — paying for lazy initialisation
 * (memory arenas, kernel selection per shape). Timed runs go to `observe` (they seed the
 * batcher's latency model); `enough` may end it early (sizes past one that is already too slow
 * to be useful are not worth the start-up time). `optional`: a warm-up the operator did not ask
 * for — one that fails is reported there and the worker serves anyway (zeros are not valid input
 * for every model); without it a failed warm-up fails the start.
 */
export interface Warmup {
  method: string
  steps: readonly WarmupStep[]
  observe?: (rows: number, ms: number) => void
  /** true: skip the steps after this one (given its last timed run). */
  enough?: (rows: number, ms: number) => boolean
  optional?: (err: Error) => void
}

/**
 * Runs a warm-up's steps through `call` (which answers the call's time inside the worker). A
 * failure fails the warm-up unless it is optional and the worker is still `live`: then it is
 * reported and the worker serves anyway.
 */
export async function runWarmup(
  w: Warmup,
  call: (args: unknown) => Promise<number>,
  live: () => boolean,
): Promise<void> {
  try {
    for (const step of w.steps) {
      for (let i = 0; i < step.untimed; i++) await call(step.args())
      let ms = 0
      for (let round = 0; round < step.timed; round++) {
        ms = await call(step.args())
        w.observe?.(step.rows, ms)
      }
      if (w.enough?.(step.rows, ms)) return
    }
  } catch (err) {
    if (w.optional === undefined || !live()) throw err
    w.optional(err as Error)
  }
}

export interface PoolWorkerOptions {
  runner: string
  index: number
  backend: BackendSpec
  transport: Transport
  /** Tensor bytes through a shared-memory file in this folder (processes only); absent: inline. */
  shmDir?: string | undefined
  /** Tensors this size or more go through the file (shm.ts's default when absent). */
  shmMinBytes?: number | undefined
  /**
   * A thread: buffers made for a call move to it instead of being copied, and a timeout does not
   * wait for it to end (it cannot end inside a native call).
   */
  thread?: boolean
  timeoutMs?: number | undefined
  /** The most this process and the worker stay awake for a lone call's next message (hot-wait.ts); 0: never. */
  hotWaitMs?: number | undefined
  warmup?: Warmup | undefined
  /** A call ended: the pool may hand over the next. */
  onFree: () => void
}

/**
 * The life of one runner worker, from spawn to exit: its messages, the calls it holds, its
 * shared memory, its warm-up and its timeouts. Scheduling across workers and restarts belong
 * to the pool (worker-pool.ts); a restart is a new PoolWorker.
 */
export class PoolWorker {
  /** warming: running warm-up calls; neither ready nor available to callers. */
  state: 'starting' | 'warming' | 'ready' | 'down' = 'starting'
  /** Calls handed to the worker and not answered yet, by id. */
  readonly calls = new Map<number, Call>()
  /** Settles when the worker is gone, with how it went ("killed by SIGKILL"); never rejects. */
  readonly exited: Promise<{ detail: string; timedOut: boolean }>
  private shm: ShmChannel | undefined
  private killedFor: BundleError | undefined
  private killedCall: number | undefined
  private idleWaiters: (() => void)[] = []
  private nextId = 1
  private readonly t: Transport
  /** The worker's time on its last call (ms): whether a lone call is short enough to stay awake for. */
  private lastMs: number | undefined
  private readonly hot = new HotWait()

  constructor(private readonly o: PoolWorkerOptions) {
    this.t = o.transport
    this.started.catch(ignore('the pool awaits it; a restart nobody awaits must not be an unhandled rejection'))
    const file = ShmChannel.create(o.shmDir, `${o.runner}-${o.index}`, o.shmMinBytes)
    this.exited = new Promise((resolve) => (this.gone = (detail) => resolve(this.onExit(detail, file))))
    this.t.onExit((detail) => this.gone(detail))
    this.t.onMessage((m) => this.onMessage(m, file))
    const tracing = activeTracing()
    const msg: ParentMessage = {
      type: 'init',
      runner: o.runner,
      index: o.index,
      backend: o.backend,
      ...(file ? { shm: file.path, shmMinBytes: file.minBytes } : {}),
      ...(tracing ? { tracing: tracing.settings } : {}),
    }
    this.t.send(msg)
  }

  /**
   * A lone request that will call this runner has arrived (its body is still to be read and
   * decoded): an idle worker stays awake up to `ms` for the call instead of sleeping until it.
   */
  wake(ms: number): void {
    if (ms > 0 && this.state === 'ready' && this.calls.size === 0) this.t.send({ type: 'wake', ms })
  }

  get pid(): number | undefined {
    return this.t.pid
  }

  private startWaiter: { resolve: () => void; reject: (e: Error) => void } | undefined
  /** Resolves once the worker has loaded its backend and run its warm-up; rejects if it cannot. */
  readonly started: Promise<void> = new Promise((resolve, reject) => (this.startWaiter = { resolve, reject }))

  private onMessage(m: WorkerMessage, file: ShmChannel | undefined): void {
    if (m.type === 'ready') {
      // Both sides hold the file open now: its name can go (no leftovers after a SIGKILL).
      file?.unlink()
      if (m.shm && file !== undefined) this.shm = file
      else file?.close()
      this.state = 'warming'
      this.warm().then(
        () => {
          if (this.state !== 'warming') return
          this.state = 'ready'
          this.startWaiter?.resolve()
        },
        (err: Error) => {
          // A warm-up that fails on a live worker is a configuration problem: say so.
          if (this.state === 'down') return
          this.startWaiter?.reject(
            new BundleError(
              'E_RUNNER_CRASHED',
              `runner ${this.o.runner} worker #${this.o.index} failed its warm-up: ${err.message}`,
            ),
          )
          this.t.kill()
        },
      )
    } else if (m.type === 'init-error') {
      // A coded failure (no GPU, a model the backend could not find) keeps its code.
      this.startWaiter?.reject(
        new BundleError(
          m.code ?? 'E_RUNNER_CRASHED',
          `runner ${this.o.runner} worker #${this.o.index} could not start: ${m.message}`,
          m.details === undefined ? {} : { details: m.details },
        ),
      )
      this.t.kill()
    } else if (m.type === 'result' || m.type === 'error') {
      const call = this.calls.get(m.id)
      if (call === undefined) return
      clearTimeout(call.timer)
      this.calls.delete(m.id)
      this.hot.release()
      if (m.type === 'error') call.reject(errorFromWire(m))
      else {
        // Read shared-memory outputs now: the next call to use this region overwrites them.
        try {
          const value = this.shm ? this.shm.decode(m.value, m.shm) : m.value
          this.lastMs = m.ms
          call.timing?.(m.ms)
          call.resolve(value)
        } catch (err) {
          call.reject(err)
        }
      }
      this.freed()
    }
  }

  /** Ends this worker's life here: called by its exit, or by a timeout that cannot wait for one. */
  private gone: (detail: string) => void = () => undefined
  private over = false

  private onExit(detail: string, file: ShmChannel | undefined): { detail: string; timedOut: boolean } {
    if (this.over) return { detail, timedOut: false }
    this.over = true
    file?.unlink()
    file?.close()
    this.shm = undefined
    this.state = 'down'
    const calls = [...this.calls.values()]
    this.calls.clear()
    for (const call of calls) {
      clearTimeout(call.timer)
      // The call that timed out says so; the ones queued behind it in the worker were lost with it.
      call.reject(
        this.killedFor && call.id === this.killedCall
          ? this.killedFor
          : new BundleError(
              'E_RUNNER_CRASHED',
              `runner ${this.o.runner} worker #${this.o.index} ${detail} while running ${call.method}`,
            ),
      )
    }
    this.startWaiter?.reject(
      new BundleError('E_RUNNER_CRASHED', `runner ${this.o.runner} worker #${this.o.index} ${detail} during start-up`),
    )
    this.freed()
    return { detail, timedOut: this.killedFor !== undefined }
  }

  private freed(): void {
    if (this.calls.size === 0) for (const w of this.idleWaiters.splice(0)) w()
    this.o.onFree()
  }

  /** Resolves when the worker holds no call (at once if it holds none). */
  idle(): Promise<void> {
    if (this.calls.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  /** Hands `call` to the worker, under the timeout; the pool decides when it may. */
  send(call: Call): void {
    // A region of the shared-memory file no other call in flight on this worker uses.
    const used = new Set([...this.calls.values()].map((c) => c.region))
    let region = 0
    while (used.has(region)) region++
    call.region = region
    this.calls.set(call.id, call)
    const timeoutMs = this.o.timeoutMs
    if (timeoutMs !== undefined) {
      // Counted from the call's turn in the worker: the calls ahead of it there may take their own time.
      call.timer = setTimeout(() => {
        this.killedFor = new BundleError(
          'E_RUNNER_TIMEOUT',
          `runner ${this.o.runner} took longer than ${timeoutMs} ms on ${call.method}; the worker was recycled`,
        )
        this.killedCall = call.id
        this.t.kill()
        // A thread inside a native call ends only when that call returns, which may be never:
        // its calls fail now and the pool replaces it now; the thread goes whenever it can.
        if (this.o.thread) this.gone('was terminated after a timeout')
      }, timeoutMs * this.calls.size)
    }
    const transfer: ArrayBuffer[] = []
    let args: unknown
    let shm: ShmSlot[] = []
    try {
      if (this.shm) ({ value: args, slots: shm } = this.shm.encode(call.args, region))
      else args = joinAll(call.args, this.o.thread ? transfer : undefined)
    } catch {
      args = joinAll(call.args, undefined) // the bytes go inline
      shm = []
    }
    this.t.send(
      {
        type: 'run',
        id: call.id,
        method: call.method,
        args,
        region,
        ...(shm.length ? { shm } : {}),
        ...(call.trace ? { trace: call.trace } : {}),
      },
      transfer,
    )
    // A lone request's short call: stay awake for the answer (see hot-wait.ts).
    const hotMs = this.o.hotWaitMs ?? 0
    const short = this.lastMs !== undefined && this.lastMs <= HOT_ANSWER_MAX_MS
    if (hotMs > 0 && short && this.calls.size === 1 && requestsInFlight.count <= 1)
      this.hot.hold(Math.min(hotMs, 2 * this.lastMs! + 1))
  }

  /** Runs the warm-up calls, timed inside the worker (compute, as batches are). */
  private async warm(): Promise<void> {
    const w = this.o.warmup
    if (w === undefined) return
    const call = (args: unknown) =>
      new Promise<number>((resolve, reject) => {
        let ms = 0
        this.send({
          id: -this.nextId++,
          method: w.method,
          args,
          timing: (t) => (ms = t),
          resolve: () => resolve(ms),
          reject,
        })
      })
    // A worker that died is not warm, whoever asked for the warm-up.
    await runWarmup(w, call, () => this.state === 'warming')
  }

  kill(): void {
    this.t.kill()
  }

  /** Asks the worker to exit (ends it after 2 s); resolves once it is gone. */
  async shutDown(): Promise<void> {
    await this.t.shutDown()
    await this.exited
  }
}

/**
 * `args` with every gathered tensor joined into one buffer (what goes inline). With `transfer`,
 * each joined buffer is new and listed there, so it can move to a thread without a copy.
 */
function joinAll(v: unknown, transfer: ArrayBuffer[] | undefined, depth = 0): unknown {
  if (isGathered(v)) {
    if (transfer === undefined) return joined(v)
    const t = v.parts.length === 1 ? { ...joined(v), data: v.parts[0]!.slice() } : joined(v)
    transfer.push(t.data.buffer as ArrayBuffer)
    return t
  }
  if (depth > 4 || typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) return v
  if (Array.isArray(v)) return v.map((x) => joinAll(x, transfer, depth + 1))
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, joinAll(x, transfer, depth + 1)]))
}
