import { BundleError, isBundleError, ignore } from '../../errors/index.js'
import { Dispatcher, type DispatcherOptions, type DispatcherStats, type SubmitOptions } from '../batching/dispatcher.js'
import { LatencyModel } from '../batching/latency-model.js'
import type { WireTensor } from '../pool/protocol.js'
import { SEQUENCE_FREE, type SequenceId, type SequenceSpec } from './protocol.js'
import { Frame } from './frame.js'
import type { SequenceFrame } from './options.js'
import { type FrameResult, type PinnedPool, runSequenceBatch } from './run-batch.js'
import { SequenceTable } from './table.js'

type Request = Record<string, WireTensor>

/** The sequence batcher's own counts, beside its batchers' (GET /runners, metrics). */
export interface SequenceStats {
  /** Sequences live now (their state held by a worker). */
  active: number
  /** Frames waiting behind their sequence's previous frame. */
  waitingFrames: number
  /** Sequences evicted after idleTimeoutMs, and lost with their worker, since start. */
  evicted: number
  lost: number
}

export interface SequenceBatcherOptions {
  runner: string
  spec: SequenceSpec
  workers: number
  idleTimeoutMs: number
  /** Each worker's batcher's settings (one batch slot each; one latency model for all). */
  dispatcher: Omit<DispatcherOptions, 'slots' | 'model'>
  /** The pool (set once it exists). */
  pool: () => PinnedPool
  /** Metrics: sequences evicted for idleness, lost with their worker. */
  onEvicted?: (n: number) => void
  onLost?: (n: number) => void
}

const RAN = { kind: 'ran' } as const
const NOT_RUN = { kind: 'not-run' } as const

/** A worker error after which the worker restarts without the state it held. */
const workerLost = (err: unknown): boolean =>
  isBundleError(err) && (err.code === 'E_RUNNER_CRASHED' || err.code === 'E_RUNNER_TIMEOUT')

/**
 * Triton's sequence batcher (its "oldest" strategy, with implicit state) for one generation of a
 * stateful onnx runner. Each worker has a batcher of its own (the usual Dispatcher, one slot):
 * a sequence's frames go to the worker that holds its state, one at a time (SequenceTable), and
 * the frames of different sequences waiting there are batched together as any runner's
 * requests are — deadlines, priorities, the adaptive window and the batch metrics included.
 *
 * @example
 * const out = await batcher.submit(wire, key, { id: 'client-42', start: true, end: false }, {})
 */
export class SequenceBatcher {
  /** One latency model for every worker's batcher: the workers run the same model. */
  readonly model = new LatencyModel()
  private readonly dispatchers: Dispatcher<Frame, FrameResult>[]
  private readonly table: SequenceTable<Frame>
  private readonly sweeper: NodeJS.Timeout
  private closing = false
  private evicted = 0
  private lost = 0

  constructor(private readonly o: SequenceBatcherOptions) {
    this.dispatchers = Array.from(
      { length: o.workers },
      (_, w) =>
        new Dispatcher<Frame, FrameResult>({ ...o.dispatcher, slots: 1, model: this.model }, (slices, _rows, report) =>
          runSequenceBatch(o.runner, o.pool(), w, slices, o.spec.batchDims, report),
        ),
    )
    this.table = new SequenceTable<Frame>({
      runner: o.runner,
      idleTimeoutMs: o.idleTimeoutMs,
      now: () => performance.now(),
      pick: () => this.pick(),
      send: (w, id, f) => this.send(w, id, f),
      // A worker that is gone has dropped the state anyway.
      free: (w, ids) =>
        void o
          .pool()
          .runOn(w, SEQUENCE_FREE, { ids })
          .catch(ignore('a worker that cannot free sequences has lost them already (it restarts empty)')),
      evicted: (n) => {
        this.evicted += n
        o.onEvicted?.(n)
      },
      lost: (n) => {
        this.lost += n
        o.onLost?.(n)
      },
    })
    // Eviction is checked a few times per idle timeout; the timer never keeps the process alive.
    const every = Math.max(10, Math.min(o.idleTimeoutMs / 4, 5_000))
    this.sweeper = setInterval(() => this.table.sweep(), every)
    this.sweeper.unref()
  }

  /**
   * Queues one frame (one row) of sequence `frame.id`; resolves with the model's non-state
   * outputs for it once its sequence's earlier frames have run. `key`: frames share a batch only
   * with the same key (input shapes, dtypes).
   */
  submit(wire: Request, key: string, frame: Required<SequenceFrame>, call: SubmitOptions): Promise<Request> {
    if (this.closing) return Promise.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.o.runner} is stopping`))
    // A frame waiting behind its sequence's earlier frames spends its deadline there too.
    const deadline = Math.min(call.deadline ?? Infinity, performance.now() + this.dispatchers[0]!.deadlineMs)
    const f = new Frame(frame.id, wire, key, frame.start, frame.end, { ...call, key, deadline })
    try {
      this.table.accept(frame.id, f)
    } catch (err) {
      return Promise.reject(err)
    }
    return f.promise
  }

  /** The state and constants its workers keep. */
  get spec(): SequenceSpec {
    return this.o.spec
  }

  /** A worker died or was recycled after a timeout: the sequences it held are lost. */
  workerEvent(e: { type: 'crash' | 'restart' | 'timeout'; index: number; detail: string }): void {
    if (e.type !== 'restart') this.table.loseWorker(e.index, `worker #${e.index} restarted: ${e.detail}`)
  }

  /** The sequences of the generation this one replaces are lost to it: their next frames say so. */
  inherit(previous: SequenceBatcher, reason: string): void {
    this.table.markLost(previous.table.ids(), reason)
  }

  /** Live sequences. */
  active(): number {
    return this.table.size
  }

  stats(): DispatcherStats & { sequences: SequenceStats } {
    const all = this.dispatchers.map((d) => d.stats())
    const waiting = this.table.waitingFrames()
    const sum = (k: 'queuedRows' | 'queuedRequests' | 'inFlight') => all.reduce((n, s) => n + s[k], 0)
    return {
      queuedRows: sum('queuedRows') + waiting,
      queuedRequests: sum('queuedRequests') + waiting,
      inFlight: sum('inFlight'),
      targetBatchSize: Math.max(...all.map((s) => s.targetBatchSize)),
      observations: this.model.observations,
      overheadMs: Math.min(...all.map((s) => s.overheadMs)),
      sequences: { active: this.table.size, waitingFrames: waiting, evicted: this.evicted, lost: this.lost },
    }
  }

  /** The refusal a frame arriving now would get from the least loaded worker's batcher (see Dispatcher.refusal). */
  refusal(
    rows: number,
    options: { deadline?: number | undefined; priority?: number | undefined },
  ): BundleError | undefined {
    let best = this.dispatchers[0]!
    for (const d of this.dispatchers) if (d.stats().queuedRows < best.stats().queuedRows) best = d
    return best.refusal(rows, options)
  }

  /** Sequence runners do not autoscale (a removed worker would take its sequences' state with it). */
  setSlots(_slots: number): void {}

  /**
   * Stops taking frames; those accepted run, each sequence's in order, then every worker's
   * batcher drains. Resolves once nothing is queued or running.
   */
  async drain(): Promise<void> {
    this.closing = true
    clearInterval(this.sweeper)
    await this.table.idle()
    await Promise.all(this.dispatchers.map((d) => d.drain()))
  }

  /** Stops at once: eviction ends, frames are refused (a generation that never started). */
  close(): void {
    this.closing = true
    clearInterval(this.sweeper)
  }

  /** A new sequence goes to the ready worker holding the fewest (any worker, while none is ready). */
  private pick(): number {
    const ready = this.o
      .pool()
      .readyWorkers()
      .filter((w) => w < this.dispatchers.length)
    const candidates = ready.length > 0 ? ready : this.dispatchers.map((_, w) => w)
    let best = candidates[0]!
    for (const w of candidates) if (this.table.liveOn(w) < this.table.liveOn(best)) best = w
    return best
  }

  private send(worker: number, id: SequenceId, f: Frame): void {
    this.dispatchers[worker]!.submit(f, 1, f.submit).then(
      ([r]) => {
        if (r !== undefined && 'outputs' in r) {
          this.table.settled(id, f, RAN)
          f.answer(r.outputs)
          return
        }
        this.table.settled(id, f, NOT_RUN)
        if (r !== undefined && 'missing' in r)
          f.fail(
            new BundleError(
              'E_SEQUENCE_UNKNOWN',
              `runner ${this.o.runner}: worker #${worker} holds no state for sequence ${JSON.stringify(id)} ` +
                '(its start frame did not run); send its first frame with start',
            ),
          )
      },
      (err: unknown) => {
        if (workerLost(err))
          return this.table.settled(id, f, {
            kind: 'gone',
            reason: `worker #${worker} restarted: ${(err as Error).message}`,
          })
        this.table.settled(id, f, NOT_RUN)
        f.fail(err)
      },
    )
  }
}
