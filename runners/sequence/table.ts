import { BundleError } from '../../errors/index.js'
import type { SequenceId } from './protocol.js'

/** What the table needs of a frame it holds. */
export interface HeldFrame {
  readonly start: boolean
  readonly end: boolean
  /** Fails the frame's caller (a later answer for it is ignored). */
  fail(err: BundleError): void
}

/**
 * How a frame handed to its worker's batcher came back: `ran` — the model ran it, its state moved
 * on; `not-run` — refused or failed, the state is as it was; `gone` — the worker holding the
 * state died with it (`reason` says how).
 */
export type FrameOutcome = { kind: 'ran' } | { kind: 'not-run' } | { kind: 'gone'; reason: string }

interface Entry<F> {
  id: SequenceId
  worker: number
  /** The frame in its worker's batcher now (queued there or running): at most one per sequence. */
  running: F | undefined
  /** Frames that wait for it, in arrival order. */
  waiting: F[]
  /** An end frame was accepted: frames after it need a start. */
  ended: boolean
  lastUsed: number
}

export interface TableOptions<F> {
  runner: string
  idleTimeoutMs: number
  now: () => number
  /** The worker for a new sequence (see liveOn). */
  pick: () => number
  /** Hands a frame to its worker's batcher; its end is reported with settled(). */
  send: (worker: number, id: SequenceId, frame: F) => void
  /** Tells a worker to drop the state of sequences evicted for idleness. */
  free: (worker: number, ids: SequenceId[]) => void
  /** Sequences evicted for idleness, and lost with their worker. */
  evicted?: (n: number) => void
  lost?: (n: number) => void
}

const quote = (id: SequenceId) => JSON.stringify(id)

/**
 * The sequences of one runner in the API process, and the order of their frames. A sequence
 * sticks to the worker chosen at its start frame (its state lives there); at most one of its
 * frames is in that worker's batcher at a time, the rest wait here in arrival order — so frames
 * of one sequence run in order and never share a batch, while frames of different sequences do.
 * Idle sequences are evicted (sweep), and a worker's death loses its sequences: their frames
 * fail with E_SEQUENCE_LOST, as do later frames without start, until an idle timeout forgets them.
 * Pure logic: the clock and the batchers are passed in, so tests drive it by hand.
 */
export class SequenceTable<F extends HeldFrame> {
  private readonly entries = new Map<SequenceId, Entry<F>>()
  /** Sequences lost with their worker: why, and since when (forgotten after the idle timeout). */
  private readonly lostIds = new Map<SequenceId, { reason: string; at: number }>()
  private readonly counts = new Map<number, number>()
  /** Frames held (running or waiting), for drain. */
  private held = 0
  private idleWaiters: (() => void)[] = []

  constructor(private readonly o: TableOptions<F>) {}

  /** Live sequences. */
  get size(): number {
    return this.entries.size
  }

  /** Live sequences on `worker`. */
  liveOn(worker: number): number {
    return this.counts.get(worker) ?? 0
  }

  /** Frames waiting behind their sequence's running frame (not in a batcher yet). */
  waitingFrames(): number {
    let n = 0
    for (const e of this.entries.values()) n += e.waiting.length
    return n
  }

  ids(): SequenceId[] {
    return [...this.entries.keys()]
  }

  /**
   * Takes a frame of sequence `id`. A start creates the sequence (or starts a live one over, after
   * its queued frames); any other frame needs a live sequence. Throws the coded error of a frame
   * that cannot be taken.
   */
  accept(id: SequenceId, frame: F): void {
    let e = this.entries.get(id)
    if (!frame.start) {
      if (e === undefined) {
        const lost = this.lostIds.get(id)
        if (lost) throw this.lostError(id, lost.reason)
        throw new BundleError(
          'E_SEQUENCE_UNKNOWN',
          `runner ${this.o.runner} holds no sequence ${quote(id)} (never started, or evicted after ` +
            `${this.o.idleTimeoutMs} ms idle); send its first frame with start`,
        )
      }
      if (e.ended)
        throw new BundleError(
          'E_SEQUENCE_UNKNOWN',
          `runner ${this.o.runner}: sequence ${quote(id)} has ended; send its first frame with start`,
        )
    }
    if (e === undefined) {
      this.lostIds.delete(id)
      const worker = this.o.pick()
      e = { id, worker, running: undefined, waiting: [], ended: false, lastUsed: this.o.now() }
      this.entries.set(id, e)
      this.counts.set(worker, this.liveOn(worker) + 1)
    }
    e.ended = frame.end
    e.waiting.push(frame)
    this.held++
    this.pump(e)
  }

  /**
   * The frame `frame` of `id` came back from its worker's batcher; the caller answers it (a
   * `gone` one is failed here, with the sequence's other frames).
   */
  settled(id: SequenceId, frame: F, outcome: FrameOutcome): void {
    const e = this.entries.get(id)
    // A frame of a sequence lost meanwhile was failed then: nothing more to do for it.
    if (e === undefined || e.running !== frame) return
    // The frame fails with the rest of its sequence's frames.
    if (outcome.kind === 'gone') {
      this.lose(e, outcome.reason)
      return
    }
    e.running = undefined
    this.release(1)
    e.lastUsed = this.o.now()
    if (outcome.kind === 'ran' && frame.end && e.waiting.length === 0) {
      this.remove(e)
      return
    }
    this.pump(e)
  }

  /** Worker `worker` died: its sequences are lost, their frames fail now. */
  loseWorker(worker: number, reason: string): void {
    for (const e of [...this.entries.values()]) if (e.worker === worker) this.lose(e, reason)
  }

  /** Every live sequence is lost (the runner changed model version); their held frames fail now. */
  loseAll(reason: string): void {
    for (const e of [...this.entries.values()]) this.lose(e, reason)
  }

  /** Remembers sequences as lost without holding them (the previous model version's). */
  markLost(ids: readonly SequenceId[], reason: string): void {
    const at = this.o.now()
    let n = 0
    for (const id of ids) {
      if (this.entries.has(id)) continue
      this.lostIds.set(id, { reason, at })
      n++
    }
    if (n > 0) this.o.lost?.(n)
  }

  /** Evicts sequences idle for idleTimeoutMs (their workers free the state) and forgets old losses. */
  sweep(): void {
    const now = this.o.now()
    const limit = this.o.idleTimeoutMs
    const freed = new Map<number, SequenceId[]>()
    for (const e of [...this.entries.values()]) {
      if (e.running !== undefined || e.waiting.length > 0 || now - e.lastUsed < limit) continue
      this.remove(e)
      const ids = freed.get(e.worker) ?? []
      ids.push(e.id)
      freed.set(e.worker, ids)
    }
    for (const [id, l] of this.lostIds) if (now - l.at >= limit) this.lostIds.delete(id)
    let n = 0
    for (const [worker, ids] of freed) {
      n += ids.length
      this.o.free(worker, ids)
    }
    if (n > 0) this.o.evicted?.(n)
  }

  /** Resolves once no frame is held (running or waiting). */
  idle(): Promise<void> {
    if (this.held === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private pump(e: Entry<F>): void {
    if (e.running !== undefined) return
    const next = e.waiting.shift()
    if (next === undefined) return
    e.running = next
    this.o.send(e.worker, e.id, next)
  }

  private lose(e: Entry<F>, reason: string): void {
    this.remove(e)
    this.lostIds.set(e.id, { reason, at: this.o.now() })
    const err = this.lostError(e.id, reason)
    const frames = [...(e.running ? [e.running] : []), ...e.waiting]
    e.running = undefined
    e.waiting = []
    this.release(frames.length)
    for (const f of frames) f.fail(err)
    this.o.lost?.(1)
  }

  private remove(e: Entry<F>): void {
    if (this.entries.get(e.id) !== e) return
    this.entries.delete(e.id)
    this.counts.set(e.worker, this.liveOn(e.worker) - 1)
  }

  private release(n: number): void {
    this.held -= n
    if (this.held === 0) for (const w of this.idleWaiters.splice(0)) w()
  }

  private lostError(id: SequenceId, reason: string): BundleError {
    return new BundleError(
      'E_SEQUENCE_LOST',
      `runner ${this.o.runner}: the state of sequence ${quote(id)} is gone (${reason}); start the sequence again`,
    )
  }
}
