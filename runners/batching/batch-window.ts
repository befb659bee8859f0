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
  /** Moving averages of the gaps between arrivals (ms) and of the rows each brought. */
  private meanGap = 0
  private meanRows = 0
  /**
   * Whether rows have been seen arriving while others waited. A client alone in a closed loop
   * (or clients that are all waiting on this runner) sends nothing while its request is queued,
   * whatever the arrival rate says: waiting there for "the next row" only delays the row that is
   * here (0.57 ms of the quickstart's one-connection p50, bench:defaults). An arrival into a
   * queue that holds rows sets it; a wait that brought nothing clears it.
   */
  private overlap = false

  constructor(
    private readonly maxDelayMs: number,
    private readonly model: LatencyModel,
    private readonly sizer: BatchSizer,
  ) {}

  /**
   * `rows` rows arrived now (refused ones included: the rate is of rows offered); `intoQueue`:
   * other rows were waiting when they came.
   */
  arrived(now: number, rows: number, intoQueue: boolean): void {
    if (intoQueue) this.overlap = true
    if (this.lastArrival === undefined) this.meanRows = rows
    else if (this.meanGap === 0) this.meanGap = Math.max(now - this.lastArrival, 0.001)
    else {
      this.meanGap += 0.2 * (Math.max(now - this.lastArrival, 0.001) - this.meanGap)
      this.meanRows += 0.2 * (rows - this.meanRows)
    }
    this.lastArrival = now
    this.arrivals++
  }

  /** A wait begins now. */
  waiting(): void {
    this.waitArrivals = this.arrivals
  }

  /**
   * Arrival rate in rows per ms: the averages of rows and of gaps, divided. (An average of
   * rows ÷ gap is dominated by its shortest gaps — two requests a microsecond apart read as a
   * thousand rows a ms — and made the window wait for rows that were not coming while the worker
   * idled.)
   */
  private get rate(): number {
    return this.meanGap > 0 ? this.meanRows / this.meanGap : 0
  }

  /** Nothing arrived during the last wait: the rate estimate was stale. */
  waitedInVain(): boolean {
    const inVain = this.arrivals === this.waitArrivals
    if (inVain) this.overlap = false
    return inVain
  }

  /**
   * How long to hold `queued` rows hoping to reach `target` (0 = run now). Waiting must fit in
   * the batch window (maxDelayMs from the head's arrival) and in the head's deadline, and must
   * raise throughput: target rows after the wait beat the queued rows now.
   */
  worthWaiting(now: number, head: Waiting, queued: number, target: number): number {
    if (!this.overlap || this.rate <= 0 || this.model.observations === 0) return 0
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
