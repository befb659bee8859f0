import type { Clock } from '../../runners/batching/clock.js'

/** Time that moves only when a test says so; timers fire in order as it passes. */
export class FakeClock implements Clock {
  private t = 0
  private seq = 0
  private timers: { at: number; id: number; fn: () => void }[] = []

  now(): number {
    return this.t
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq
    this.timers.push({ at: this.t + Math.max(0, ms), id, fn })
    return id
  }

  /** Timers set and not yet fired or cleared. */
  pending(): number {
    return this.timers.length
  }

  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle)
  }

  /**
   * Lets promise callbacks run (they may set new timers). One macrotask turn is enough: Node drains
   * the whole microtask queue, chains included, before it runs the next immediate, and nothing on
   * fake time waits on real I/O or real timers. (Five turns per fired timer made the overload
   * simulations, hundreds of thousands of timers, take minutes of the test run.)
   */
  async settle(): Promise<void> {
    await new Promise((r) => setImmediate(r))
  }

  /** Moves time forward by `ms`, firing due timers in order and settling after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms
    await this.settle()
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.id - b.id)
      const next = this.timers[0]
      if (next === undefined || next.at > end) break
      this.timers.shift()
      this.t = next.at
      next.fn()
      await this.settle()
    }
    this.t = end
    await this.settle()
  }
}
