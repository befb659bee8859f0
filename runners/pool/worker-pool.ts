import { fork, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { BundleError, errorFromWire } from '../../errors/index.js'
import { isGathered, joined, workerTitle, type BackendSpec, type ParentMessage, type WorkerMessage } from './protocol.js'
import { ShmChannel, shmDir } from './shm.js'
import type { LocalPool } from './pool.js'

export interface PoolOptions {
  runner: string
  workers: number
  backend: BackendSpec
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
}

/**
 * Warm-up: for each size, ascending, `method` runs once untimed — paying for lazy
 * initialisation (memory arenas, kernel selection per shape) — then `rounds` times timed, the
 * timings going to `observe` (they seed the batcher's latency model). `enough` may end it early:
 * sizes past one that is already too slow to be useful are not worth the start-up time.
 */
export interface Warmup {
  method: string
  sizes: readonly number[]
  rounds: number
  args: (rows: number) => unknown
  observe?: (rows: number, ms: number) => void
  /** true: skip the sizes after this one (given its last timed run). */
  enough?: (rows: number, ms: number) => boolean
}

interface Call {
  id: number
  method: string
  args: unknown
  /** Told how long the call ran inside the worker. */
  timing?: ((ms: number) => void) | undefined
  /** The part of the worker's shared-memory file its tensors use (one per call in flight). */
  region?: number
  resolve: (v: unknown) => void
  reject: (e: unknown) => void
  timer?: NodeJS.Timeout
}

interface Slot {
  index: number
  child?: ChildProcess
  /** warming: running warm-up calls; neither ready nor available to callers. */
  state: 'starting' | 'warming' | 'ready' | 'down'
  /** Calls handed to the worker and not answered yet, by id (at most `depth`). */
  calls: Map<number, Call>
  backoff: number
  /** Set when a call timed out: the exit that follows is ours, not a crash. */
  killedFor?: BundleError
  killedCall?: number
  /** Tensor bytes go through this file once the worker confirmed it opened it. */
  shm?: ShmChannel
  /** Added by grow() and not ready yet: does not make the pool unready. */
  growing?: boolean
  /** Being removed by shrink(): takes no calls, is not restarted. */
  retiring?: boolean
}

// The compiled worker sits next to this file; from source (tests, tsx) it is the .ts file.
function entry(): { file: string; execArgv: string[] } {
  const js = fileURLToPath(new URL('./worker-entry.js', import.meta.url))
  if (existsSync(js)) return { file: js, execArgv: [] }
  return { file: fileURLToPath(new URL('./worker-entry.ts', import.meta.url)), execArgv: ['--import', 'tsx'] }
}

/**
 * N worker processes for one runner. Calls go to an idle worker (FIFO when all are busy). A
 * worker that dies fails its call at once with E_RUNNER_CRASHED and comes back after a backoff;
 * a call past timeoutMs fails with E_RUNNER_TIMEOUT and its worker is killed and replaced.
 */
export class WorkerPool implements LocalPool {
  readonly kind = 'process' as const
  /** Batches reach a worker as pieces written straight into its shared memory. */
  readonly gathers = true
  private readonly slots: Slot[]
  private readonly waiting: Call[] = []
  private nextId = 1
  private stopping = false
  private readonly shmDir = shmDir()
  readonly depth: number
  restarts = 0

  constructor(private readonly options: PoolOptions) {
    this.depth = Math.max(1, options.depth ?? 1)
    this.slots = Array.from({ length: options.workers }, (_, index) => ({ index, state: 'down' as const, calls: new Map(), backoff: options.backoffMs?.min ?? 100 }))
  }

  /** Starts every worker; resolves when all are ready, rejects if one cannot load its backend. */
  async start(): Promise<void> {
    await Promise.all(this.slots.map((s) => this.spawn(s)))
  }

  ready(): boolean {
    return !this.stopping && this.slots.every((s) => s.growing || s.state === 'ready')
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
    const slot: Slot = { index: Math.max(-1, ...this.slots.map((s) => s.index)) + 1, state: 'down', calls: new Map(), backoff: this.options.backoffMs?.min ?? 100, growing: true }
    this.slots.push(slot)
    try {
      await this.spawn(slot)
    } catch (err) {
      slot.retiring = true
      this.slots.splice(this.slots.indexOf(slot), 1)
      slot.child?.kill('SIGKILL')
      throw err
    } finally {
      slot.growing = false
    }
  }

  /** Removes one worker (an idle one if there is one) once its call, if any, is done. */
  async shrink(): Promise<void> {
    const live = this.slots.filter((s) => !s.retiring)
    if (live.length <= 1) return
    const slot = live.find((s) => s.state === 'ready' && s.calls.size === 0) ?? live[live.length - 1]!
    slot.retiring = true
    while (slot.calls.size > 0) await new Promise((r) => setTimeout(r, 10))
    const child = slot.child
    this.slots.splice(this.slots.indexOf(slot), 1)
    await shutDown(child)
  }

  pids(): number[] {
    return this.slots.flatMap((s) => (s.child?.pid !== undefined && s.state !== 'down' ? [s.child.pid] : []))
  }

  private spawn(slot: Slot): Promise<void> {
    const { file, execArgv } = entry()
    const title = workerTitle(this.options.runner, slot.index)
    const child = fork(file, [title], {
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, ...this.options.env?.(slot.index) },
    })
    slot.child = child
    slot.state = 'starting'
    slot.shm = undefined
    const shm = ShmChannel.create(this.shmDir, `${this.options.runner}-${slot.index}`)
    // IPC to a worker that just died fails with EPIPE; its 'exit' handler does the cleanup.
    child.on('error', () => undefined)
    return new Promise<void>((resolve, reject) => {
      child.on('message', (m: WorkerMessage) => {
        if (m.type === 'ready') {
          // Both sides hold the file open now: its name can go (no leftovers after a SIGKILL).
          shm?.unlink()
          if (m.shm && shm !== undefined) slot.shm = shm
          else shm?.close()
          slot.state = 'warming'
          this.warm(slot).then(
            () => {
              if (slot.child !== child || slot.state !== 'warming') return
              slot.state = 'ready'
              slot.backoff = this.options.backoffMs?.min ?? 100
              resolve()
              this.pump()
            },
            (err: Error) => {
              // A warm-up that fails on a live worker is a configuration problem: say so.
              if (slot.child === child && child.exitCode === null) {
                reject(new BundleError('E_RUNNER_CRASHED', `runner ${this.options.runner} worker #${slot.index} failed its warm-up: ${err.message}`))
                child.kill('SIGKILL')
              }
            },
          )
        } else if (m.type === 'init-error') {
          // A coded failure (no GPU, a model the backend could not find) keeps its code.
          reject(new BundleError(m.code ?? 'E_RUNNER_CRASHED', `runner ${this.options.runner} worker #${slot.index} could not start: ${m.message}`, m.details === undefined ? {} : { details: m.details }))
          child.kill('SIGKILL')
        } else if (m.type === 'result' || m.type === 'error') {
          const call = slot.calls.get(m.id)
          if (call === undefined) return
          clearTimeout(call.timer)
          slot.calls.delete(m.id)
          if (m.type === 'result') {
            // Read shared-memory outputs now: the next call to use this region overwrites them.
            let value: unknown
            try {
              value = slot.shm ? slot.shm.decode(m.value) : m.value
            } catch (err) {
              call.reject(err)
              this.pump()
              return
            }
            call.timing?.(m.ms)
            call.resolve(value)
          } else call.reject(errorFromWire(m))
          this.pump()
        }
      })
      child.on('exit', (code, signal) => {
        shm?.unlink()
        shm?.close()
        if (slot.shm === shm) slot.shm = undefined
        const calls = [...slot.calls.values()]
        slot.calls.clear()
        slot.state = 'down'
        const detail = signal ? `killed by ${signal}` : `exited with code ${code}`
        for (const call of calls) {
          clearTimeout(call.timer)
          // The call that timed out says so; the ones queued behind it in the worker were lost with it.
          call.reject(slot.killedFor && call.id === slot.killedCall ? slot.killedFor : new BundleError('E_RUNNER_CRASHED', `runner ${this.options.runner} worker #${slot.index} ${detail} while running ${call.method}`))
        }
        const timedOut = slot.killedFor !== undefined
        slot.killedFor = undefined
        reject(new BundleError('E_RUNNER_CRASHED', `runner ${this.options.runner} worker #${slot.index} ${detail} during start-up`))
        if (this.stopping || slot.retiring) return
        this.options.onEvent?.({ type: timedOut ? 'timeout' : 'crash', index: slot.index, detail })
        const delay = timedOut ? 0 : slot.backoff
        slot.backoff = Math.min(slot.backoff * 2, this.options.backoffMs?.max ?? 5_000)
        setTimeout(() => {
          if (this.stopping || slot.retiring) return
          this.restarts++
          this.options.onEvent?.({ type: 'restart', index: slot.index, detail: `after ${delay} ms` })
          this.spawn(slot).catch(() => undefined) // a failed restart exits and schedules the next one
        }, delay).unref()
      })
      const msg: ParentMessage = { type: 'init', runner: this.options.runner, index: slot.index, backend: this.options.backend, ...(shm ? { shm: shm.path } : {}) }
      child.send(msg, (err) => err && child.kill('SIGKILL'))
    })
  }

  /**
   * Runs `method` on an idle worker; args and results may hold typed arrays (sent as bytes).
   * `timing` is told how long the call ran inside the worker.
   */
  run(method: string, args: unknown, timing?: (ms: number) => void): Promise<unknown> {
    if (this.stopping) return Promise.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} is stopping`))
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, method, args, timing, resolve, reject })
      this.pump()
    })
  }

  /** Hands waiting calls to the ready workers with the fewest calls in hand, up to `depth` each. */
  private pump(): void {
    while (this.waiting.length > 0) {
      let best: Slot | undefined
      for (const slot of this.slots) {
        if (slot.state !== 'ready' || slot.child === undefined || slot.retiring || slot.calls.size >= this.depth) continue
        if (best === undefined || slot.calls.size < best.calls.size) best = slot
      }
      if (best === undefined) return
      this.send(best, this.waiting.shift()!)
    }
  }

  /** Hands `call` to the worker in `slot`, under the pool's timeout. */
  private send(slot: Slot, call: Call): void {
    // A region of the shared-memory file no other call in flight on this worker uses.
    const used = new Set([...slot.calls.values()].map((c) => c.region))
    let region = 0
    while (used.has(region)) region++
    call.region = region
    slot.calls.set(call.id, call)
    if (this.options.timeoutMs !== undefined) {
      // Counted from the call's turn in the worker: the calls ahead of it there may take their own time.
      call.timer = setTimeout(() => {
        slot.killedFor = new BundleError('E_RUNNER_TIMEOUT', `runner ${this.options.runner} took longer than ${this.options.timeoutMs} ms on ${call.method}; the worker was recycled`)
        slot.killedCall = call.id
        slot.child?.kill('SIGKILL')
      }, this.options.timeoutMs * slot.calls.size)
    }
    let args = call.args
    try {
      args = slot.shm ? slot.shm.encode(call.args, region) : joinAll(call.args)
    } catch {
      args = joinAll(call.args) // the bytes go inline
    }
    const msg: ParentMessage = { type: 'run', id: call.id, method: call.method, args, region }
    // A send that fails means the worker is gone: 'exit' fails the call with E_RUNNER_CRASHED.
    slot.child!.send(msg, (err) => err && slot.child?.kill('SIGKILL'))
  }

  /** Runs the warm-up calls on one worker, timed inside it (compute, as batches are). */
  private async warm(slot: Slot): Promise<void> {
    const w = this.options.warmup
    if (w === undefined || w.rounds < 1) return
    const call = (rows: number) =>
      new Promise<number>((resolve, reject) => {
        let ms = 0
        this.send(slot, { id: this.nextId++, method: w.method, args: w.args(rows), timing: (t) => (ms = t), resolve: () => resolve(ms), reject })
      })
    for (const rows of w.sizes) {
      await call(rows)
      let ms = 0
      for (let round = 0; round < w.rounds; round++) {
        ms = await call(rows)
        w.observe?.(rows, ms)
      }
      if (w.enough?.(rows, ms)) return
    }
  }

  /** Fails queued calls, lets running ones finish (up to graceMs), then stops every worker. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true
    for (const call of this.waiting.splice(0)) call.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.options.runner} is stopping`))
    const deadline = Date.now() + graceMs
    while (this.slots.some((s) => s.calls.size > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    await Promise.all(this.slots.map((s) => shutDown(s.child)))
  }
}

/** `args` with every gathered tensor joined into one buffer (what goes inline over IPC). */
function joinAll(v: unknown, depth = 0): unknown {
  if (isGathered(v)) return joined(v)
  if (depth > 4 || typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) return v
  if (Array.isArray(v)) return v.map((x) => joinAll(x, depth + 1))
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, joinAll(x, depth + 1)]))
}

/** Asks a worker to exit (SIGKILL after 2 s if it does not); resolves when it is gone. */
function shutDown(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 2_000)
    child.once('exit', () => {
      clearTimeout(kill)
      resolve()
    })
    if (child.connected) child.send({ type: 'shutdown' } satisfies ParentMessage, (err) => err && child.kill('SIGKILL'))
    else child.kill('SIGTERM')
  })
}
