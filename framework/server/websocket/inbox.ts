/**
 * A WebSocket's incoming messages as the AsyncIterable an API method reads. Messages wait here
 * while the method is busy; past `highWater` waiting ones the socket is paused (TCP pushes back
 * on the client) and resumed once the method has caught up, so a fast sender cannot fill memory.
 */
export class Inbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = []
  private waiter: ((r: IteratorResult<T>) => void) | undefined
  private failWaiter: ((err: unknown) => void) | undefined
  private ended = false
  private error: unknown
  private paused = false

  constructor(
    private readonly highWater: number,
    private readonly flow: { pause(): void; resume(): void; taken?(): void },
  ) {}

  push(item: T): void {
    if (this.ended) return
    if (this.waiter) {
      const w = this.waiter
      this.waiter = this.failWaiter = undefined
      this.flow.taken?.()
      w({ value: item, done: false })
      return
    }
    this.items.push(item)
    if (!this.paused && this.items.length >= this.highWater) {
      this.paused = true
      this.flow.pause()
    }
  }

  /** No more messages: the method's loop ends once it has read those waiting. */
  end(): void {
    this.ended = true
    this.wakeDone()
  }

  /** The input failed (a message that does not decode): the method's next read throws. */
  fail(err: unknown): void {
    if (this.ended) return
    this.ended = true
    this.error = err
    if (this.failWaiter) {
      const f = this.failWaiter
      this.waiter = this.failWaiter = undefined
      f(err)
    }
  }

  private wakeDone(): void {
    if (this.waiter && this.items.length === 0) {
      const w = this.waiter
      this.waiter = this.failWaiter = undefined
      w({ value: undefined, done: true })
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) {
          const value = this.items.shift()!
          this.flow.taken?.()
          if (this.paused && this.items.length <= this.highWater / 2) {
            this.paused = false
            this.flow.resume()
          }
          return Promise.resolve({ value, done: false })
        }
        if (this.error !== undefined) return Promise.reject(this.error)
        if (this.ended) return Promise.resolve({ value: undefined, done: true })
        return new Promise((resolve, reject) => {
          this.waiter = resolve
          this.failWaiter = reject
        })
      },
      return: () => {
        this.end()
        return Promise.resolve({ value: undefined, done: true })
      },
    }
  }
}
