/** A call's deadline while it runs: a node of the pending list. */
export class Deadline {
  prev: Deadline | undefined
  next: Deadline | undefined
  /** In the list (neither removed nor expired). */
  live = false
  constructor(
    readonly at: number,
    readonly onTimeout: () => void,
  ) {}
}

/**
 * Request timeouts without a timer or a promise per request: one interval sweeps the pending
 * deadlines while any exist (a Timeout object and its timer-list entry per request, or a promise
 * raced against the call, cost more than the rest of a small API call). The pending calls are a
 * linked list, not a Set: taking one out is a few pointer writes, where a Set hashes the entry on
 * the way in and out. Precision is a quarter of the timeout, at most 100 ms.
 */
export class Deadlines {
  private head: Deadline | undefined
  private tail: Deadline | undefined
  private count = 0
  private sweeper: NodeJS.Timeout | undefined
  private readonly tick: number

  constructor(timeoutMs: number) {
    this.tick = Math.max(5, Math.min(100, Math.floor(timeoutMs / 4)))
  }

  /** Calls waiting now. */
  get size(): number {
    return this.count
  }

  /** Calls `onTimeout` once `ms` have passed, unless `remove()`d first. */
  add(ms: number, onTimeout: () => void): Deadline {
    const d = new Deadline(performance.now() + ms, onTimeout)
    d.prev = this.tail
    if (this.tail) this.tail.next = d
    else this.head = d
    this.tail = d
    d.live = true
    this.count++
    // Not unref'd: it is what ends a pending call's wait (in app.request() tests nothing else
    // keeps the loop alive), and it stops by itself when nothing is pending.
    this.sweeper ??= setInterval(() => this.sweep(), this.tick)
    return d
  }

  /** The call ended in time (or its deadline already fired: then nothing happens). */
  remove(d: Deadline): void {
    if (!d.live) return
    d.live = false
    if (d.prev) d.prev.next = d.next
    else this.head = d.next
    if (d.next) d.next.prev = d.prev
    else this.tail = d.prev
    d.prev = d.next = undefined
    this.count--
  }

  private sweep(): void {
    const now = performance.now()
    // add() takes any ms, so the list need not be in deadline order: walk it all (at most the
    // service's concurrency limit of calls).
    for (let d = this.head; d !== undefined; ) {
      const next = d.next
      if (d.at <= now) {
        this.remove(d)
        d.onTimeout()
      }
      d = next
    }
    if (this.count === 0 && this.sweeper !== undefined) {
      clearInterval(this.sweeper)
      this.sweeper = undefined
    }
  }
}
