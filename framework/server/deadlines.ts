/** A call waiting for its work or its deadline: a node of the pending list. */
class Pending<T> {
  prev: Pending<unknown> | undefined
  next: Pending<unknown> | undefined
  resolve!: (v: T) => void
  reject!: (e: unknown) => void
  constructor(
    readonly at: number,
    readonly onTimeout: () => Error,
  ) {}
}

/**
 * Request timeouts without a timer per request: one interval sweeps the pending deadlines while
 * any exist (a Timeout object and its timer-list entry per request cost more than the rest of
 * a small API call). The pending calls are a linked list, not a Set: taking one out is two
 * pointer writes, where a Set hashes the entry on the way in and out. Precision is a quarter of
 * the timeout, at most 100 ms.
 */
export class Deadlines {
  private head: Pending<unknown> | undefined
  private tail: Pending<unknown> | undefined
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

  /** Settles like `work`, or rejects with `onTimeout()` once `ms` have passed. */
  within<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
    const entry = new Pending<T>(performance.now() + ms, onTimeout)
    const settled = new Promise<T>((resolve, reject) => {
      entry.resolve = resolve
      entry.reject = reject
    })
    this.add(entry as Pending<unknown>)
    // Not unref'd: it is what ends a pending call's wait (in app.request() tests nothing else
    // keeps the loop alive), and it stops by itself when nothing is pending.
    this.sweeper ??= setInterval(() => this.sweep(), this.tick)
    work.then(
      (v) => {
        if (this.remove(entry as Pending<unknown>)) entry.resolve(v)
      },
      (e: unknown) => {
        if (this.remove(entry as Pending<unknown>)) entry.reject(e)
      },
    )
    return settled
  }

  private add(p: Pending<unknown>): void {
    p.prev = this.tail
    if (this.tail) this.tail.next = p
    else this.head = p
    this.tail = p
    this.count++
  }

  /** Takes `p` out of the list; false if it was already out (timed out, then its work settled). */
  private remove(p: Pending<unknown>): boolean {
    if (p.prev === undefined && this.head !== p) return false
    if (p.prev) p.prev.next = p.next
    else this.head = p.next
    if (p.next) p.next.prev = p.prev
    else this.tail = p.prev
    p.prev = p.next = undefined
    this.count--
    return true
  }

  private sweep(): void {
    const now = performance.now()
    // within() takes any ms, so the list need not be in deadline order: walk it all (at most
    // the service's concurrency limit of calls).
    for (let p = this.head; p !== undefined; ) {
      const next = p.next
      if (p.at <= now) {
        this.remove(p)
        p.reject(p.onTimeout())
      }
      p = next
    }
    if (this.count === 0 && this.sweeper !== undefined) {
      clearInterval(this.sweeper)
      this.sweeper = undefined
    }
  }
}
