/**
 * Slot accounting: how many batches the workers hold, and when each worker is expected to be done
 * with what it holds. The pool decides which worker really takes a batch; this is the dispatcher's
 * model of that assignment, good enough to hand a batch over just before a worker frees up and to
 * count a batch's deadline from when it will really start.
 */
export class Workers {
  /** Batches handed to workers and not yet back. */
  busy = 0
  /** When each worker is expected to have finished what it holds (a model of the pool's assignment). */
  private ends: number[] = []
  /** The same, from the slow (p90) batch times: when a batch handed over early may start at the latest. */
  private endsSlow: number[] = []

  constructor(
    /** Batches that may run at once (one per worker); changes as workers come and go. */
    public slots: number,
    /** Batches a worker may hold at once (see DispatcherOptions.depth). */
    readonly depth: number,
  ) {}

  /** Some worker holds nothing. */
  anyFree(): boolean {
    return this.busy < this.slots
  }

  /** Every worker holds as many batches as it may. */
  full(): boolean {
    return this.busy >= this.slots * this.depth
  }

  /** When the soonest worker is expected to be free (now if one holds nothing). */
  soonestFree(now: number, slow = false): number {
    if (this.busy < this.slots) return now
    const ends = slow ? this.endsSlow : this.ends
    let min = Infinity
    for (let i = 0; i < this.slots; i++) min = Math.min(min, ends[i] ?? now)
    return Math.max(now, min)
  }

  /** A batch expected to take `typicalMs` (`slowMs` at p90) was handed over. */
  took(now: number, typicalMs: number, slowMs: number): void {
    this.busy++
    // The worker it is expected to go to (the one free soonest) holds it until about then.
    let w = 0
    for (let i = 1; i < this.slots; i++) if ((this.ends[i] ?? 0) < (this.ends[w] ?? 0)) w = i
    this.ends[w] = Math.max(now, this.ends[w] ?? 0) + typicalMs
    this.endsSlow[w] = Math.max(now, this.endsSlow[w] ?? 0) + slowMs
  }

  /** A batch came back (answered or failed). */
  returned(): void {
    this.busy--
  }
}
