import type { LatencyModel } from './latency-model.js'
import type { Waiting } from './queue.js'
import type { BatchSizer } from './sizing.js'

/**
 * The adaptive wait inside the batch window: it tracks how fast rows arrive, and holds a batch
 * short of its target only while the missing rows are expected soon and a fuller batch raises
 * throughput — never past maxDelayMs after the head arrived, nor past the head's deadline.
 */
export class BatchWindow {
  private lastArrival: number | undefined
  private arrivals = 0
  /** Arrivals counted when the current wait began: a wait that brought nothing is not repeated. */
  private waitArrivals = -1
  /** Arrival rate in rows per ms (moving average). */
  private rate = 0

  constructor(
    private readonly maxDelayMs: number,
    private readonly model: LatencyModel,
    private readonly sizer: BatchSizer,
  ) {}

  /** `rows` rows arrived now (refused ones included: the rate is of rows offered). */
  arrived(now: number, rows: number): void {
    if (this.lastArrival !== undefined) {
      const gap = Math.max(now - this.lastArrival, 0.001)
      this.rate += 0.2 * (rows / gap - this.rate)
    }
    this.lastArrival = now
    this.arrivals++
  }

  /** A wait begins now. */
  waiting(): void {
    this.waitArrivals = this.arrivals
  }

  /** Nothing arrived during the last wait: the rate estimate was stale. */
  waitedInVain(): boolean {
    return this.arrivals === this.waitArrivals
  }

  /**
   * How long to hold `queued` rows hoping to reach `target` (0 = run now). Waiting must fit in
   * the batch window (maxDelayMs from the head's arrival) and in the head's deadline, and must
   * raise throughput: target rows after the wait beat the queued rows now.
   */
  worthWaiting(now: number, head: Waiting, queued: number, target: number): number {
    if (this.rate <= 0 || this.model.observations === 0) return 0
    const window = head.arrived + this.maxDelayMs - now
    if (window <= 0) return 0
    // Silence since the last arrival lowers the rate: a burst long past says little about now.
    const silence = now - (this.lastArrival ?? now)
    const rate = silence > 0 ? Math.min(this.rate, 1 / silence) : this.rate
    const fill = (target - queued) / rate
    const slack = head.deadline - now - this.sizer.cost(target)
    if (fill > slack || fill > window) return 0
    const nowThroughput = queued / Math.max(this.model.estimate(queued), 1e-6)
    const laterThroughput = target / (fill + Math.max(this.model.estimate(target), 1e-6))
    return laterThroughput > nowThroughput ? Math.min(Math.max(fill, 0.05), window) : 0
  }
}
