import type { Clock } from '../../runners/batching/clock.js'

interface Timer {
  at: number
  id: number
  fn: () => void
}

const before = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.id < b.id)

/**
 * Time that moves only when a test says so; timers fire in order as it passes (by due time, then
 * in the order they were set). The timers are a binary heap and a cleared one is dropped when it
 * reaches the top: the overload simulations set and clear hundreds of thousands, and sorting the
 * whole list for each one fired took a good part of their run.
 */
export class FakeClock implements Clock {
  private t = 0
  private seq = 0
  private heap: Timer[] = []
  private live = new Set<number>()

  now(): number {
    return this.t
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const timer = { at: this.t + Math.max(0, ms), id: ++this.seq, fn }
    this.live.add(timer.id)
    const h = this.heap
    h.push(timer)
    for (let i = h.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1
      if (!before(h[i]!, h[parent]!)) break
      ;[h[i], h[parent]] = [h[parent]!, h[i]!]
      i = parent
    }
    return timer.id
  }

  /** Timers set and not yet fired or cleared. */
  pending(): number {
    return this.live.size
  }

  clearTimeout(handle: unknown): void {
    this.live.delete(handle as number)
  }

  /** The earliest live timer, cleared ones on top dropped on the way; undefined when none is left. */
  private peek(): Timer | undefined {
    while (this.heap.length > 0 && !this.live.has(this.heap[0]!.id)) this.pop()
    return this.heap[0]
  }

  private pop(): void {
    const h = this.heap
    const last = h.pop()!
    if (h.length === 0) return
    h[0] = last
    for (let i = 0; ; ) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < h.length && before(h[l]!, h[m]!)) m = l
      if (r < h.length && before(h[r]!, h[m]!)) m = r
      if (m === i) break
      ;[h[i], h[m]] = [h[m]!, h[i]!]
      i = m
    }
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
      const next = this.peek()
      if (next === undefined || next.at > end) break
      this.pop()
      this.live.delete(next.id)
      this.t = next.at
      next.fn()
      await this.settle()
    }
    this.t = end
    await this.settle()
  }
}
