interface Pending {
  at: number
  expire: () => void
}

/**
 * Request timeouts without a timer per request: one interval sweeps the pending deadlines while
 * any exist (a Timeout object and its timer-list entry per request cost more than the rest of
 * a small API call). Precision is a quarter of the timeout, at most 100 ms.
 */
export class Deadlines {
  private readonly pending = new Set<Pending>()
  private sweeper: NodeJS.Timeout | undefined
  private readonly tick: number

  constructor(timeoutMs: number) {
    this.tick = Math.max(5, Math.min(100, Math.floor(timeoutMs / 4)))
  }

  /** Settles like `work`, or rejects with `onTimeout()` once `ms` have passed. */
  within<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = { at: performance.now() + ms, expire: () => reject(onTimeout()) }
      this.pending.add(entry)
      // Not unref'd: it is what ends a pending call's wait (in app.request() tests nothing else
      // keeps the loop alive), and it stops by itself when nothing is pending.
      this.sweeper ??= setInterval(() => this.sweep(), this.tick)
      work.then(
        (v) => {
          this.pending.delete(entry)
          resolve(v)
        },
        (e) => {
          this.pending.delete(entry)
          reject(e)
        },
      )
    })
  }

  private sweep(): void {
    const now = performance.now()
    for (const p of this.pending) {
      if (p.at <= now) {
        this.pending.delete(p)
        p.expire()
      }
    }
    if (this.pending.size === 0 && this.sweeper !== undefined) {
      clearInterval(this.sweeper)
      this.sweeper = undefined
    }
  }
}
