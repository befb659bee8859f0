import { type Clock, realClock } from './batching/clock.js'

/**
 * Calls `onIdle` once `afterMs` have passed without a touch(). One timer, set for the moment the
 * runner would become idle; when it fires early (touched meanwhile) it is set again for the rest,
 * so a busy runner costs one timer per `afterMs`, and touch() — on every call — only notes the time.
 * `onIdle` answers whether the watch goes on (it may decline to unload: work queued, live sequences).
 */
export class IdleTimer {
  private last: number
  private handle: unknown

  constructor(
    private readonly afterMs: number,
    private readonly onIdle: () => boolean | Promise<boolean>,
    private readonly clock: Clock = realClock,
  ) {
    this.last = clock.now()
  }

  touch(): void {
    this.last = this.clock.now()
  }

  /** Starts (or restarts) the watch from now. */
  start(): void {
    this.stop()
    this.touch()
    this.arm(this.afterMs)
  }

  stop(): void {
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle)
    this.handle = undefined
  }

  private arm(ms: number): void {
    this.handle = this.clock.setTimeout(() => void this.fire(), ms)
    // A real timer never keeps the process alive.
    ;(this.handle as { unref?: () => void }).unref?.()
  }

  private async fire(): Promise<void> {
    this.handle = undefined
    const idle = this.clock.now() - this.last
    if (idle < this.afterMs) return this.arm(this.afterMs - idle)
    if (await this.onIdle()) this.arm(this.afterMs)
  }
}
