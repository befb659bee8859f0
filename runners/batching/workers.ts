/**
 * Slot accounting: how many batches the workers hold, and when each worker is expected to be done
 * with what it holds. The pool decides which worker really takes a batch; this is the dispatcher's
 * model of that assignment, good enough to hand a batch over just before a worker frees up and to
 * count a batch's deadline from when it will really start.
 *
 * Expected ends are corrected each time a batch comes back: a worker's end is then at most what it
 * still holds, counted from now. An end only ever pushed forward by estimates drifts whenever batches beat
 * their slow (p90) time — under steady load the workers are never idle, so nothing reset it — and
 * once it ran tens of ms ahead, every queued request looked late and a tight deadline shed nearly
 * all of them (a 20 ms deadline served 0.4× of what a loose one did).
 */
export class Workers {
  /** Batches handed to workers and not yet back. */
  busy = 0
  /** When each worker is expected to have finished what it holds (a model of the pool's assignment). */
  private ends: number[] = []
  /** The same, from the slow (p90) batch times: when a batch handed over early may start at the latest. */
  private endsSlow: number[] = []
  /** What each worker holds, oldest first: each batch's typical and slow time. */
  private held: { typical: number; slow: number }[][] = []

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

  /**
   * A batch expected to take `typicalMs` (`slowMs` at p90) was handed over; returns the worker it is
   * expected to go to, for returned().
   */
  took(now: number, typicalMs: number, slowMs: number): number {
    this.busy++
    // The worker free soonest (one holding nothing first) holds it until about then.
    let w = 0
    const load = (i: number) => ((this.held[i]?.length ?? 0) === 0 ? -Infinity : (this.ends[i] ?? 0))
    for (let i = 1; i < this.slots; i++) if (load(i) < load(w)) w = i
    ;(this.held[w] ??= []).push({ typical: typicalMs, slow: slowMs })
    this.ends[w] = Math.max(now, this.ends[w] ?? 0) + typicalMs
    this.endsSlow[w] = Math.max(now, this.endsSlow[w] ?? 0) + slowMs
    return w
  }

  /** The batch handed to worker `w` (took's answer) came back, answered or failed, at `now`. */
  returned(w: number, now: number): void {
    this.busy--
    const held = this.held[w] ?? []
    held.shift()
    // What the worker still holds ends at the latest its estimates from now: the answer took its way
    // back, so the next batch may have started earlier than now — the running sum, when lower, says
    // so and stays (an answer that waited in a busy event loop must not push the worker's end out).
    this.ends[w] = Math.min(this.ends[w] ?? now, now + held.reduce((s, b) => s + b.typical, 0))
    this.endsSlow[w] = Math.min(this.endsSlow[w] ?? now, now + held.reduce((s, b) => s + b.slow, 0))
  }
}
