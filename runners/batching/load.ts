import type { LatencyModel } from './latency-model.js'

// How much of one replica a runner's load takes: the rows offered to it (accepted or refused —
// refused rows are demand the replica could not meet) against the rows its workers sustain within
// the deadline, from the latency model. An autoscaler sums it over replicas (bundle_desired_replicas).

/** Rows offered per second over the last `windowMs`, in one-second buckets (pure: the caller's clock). */
export class OfferedRate {
  private readonly buckets: number[]
  private readonly starts: number[]

  constructor(windowMs = 10_000) {
    const n = Math.max(1, Math.ceil(windowMs / 1000))
    this.buckets = new Array<number>(n).fill(0)
    this.starts = new Array<number>(n).fill(Number.NEGATIVE_INFINITY)
  }

  add(now: number, rows: number): void {
    const second = Math.floor(now / 1000)
    const i = second % this.buckets.length
    if (this.starts[i] !== second) {
      this.starts[i] = second
      this.buckets[i] = 0
    }
    this.buckets[i]! += rows
  }

  /** Rows per second over the window that ends now (the current, partial second counts pro rata). */
  perSecond(now: number): number {
    const second = Math.floor(now / 1000)
    const oldest = second - this.buckets.length + 1
    let rows = 0
    for (let i = 0; i < this.buckets.length; i++) if (this.starts[i]! >= oldest) rows += this.buckets[i]!
    const spanMs = (this.buckets.length - 1) * 1000 + (now - second * 1000)
    return spanMs > 0 ? (rows * 1000) / spanMs : 0
  }
}

/**
 * Rows per second the workers sustain within the deadline: `slots` batches at once (one per
 * worker), each of the throughput-optimal size whose slow (p90) time plus the trip to the worker
 * fits in half the deadline (the other half is the queue's). Undefined before any batch was timed.
 *
 * A light load forms small batches only, so the best size measured understates what a heavier
 * load would get: the next size up counts too, its time extrapolated from the trend of the sizes
 * measured — one size beyond, no further (the estimate corrects itself as batches grow).
 */
export function sustainedRate(
  model: LatencyModel,
  o: { slots: number; maxBatchSize: number; deadlineMs: number; overheadMs: number },
): number | undefined {
  if (model.observations === 0) return undefined
  const batchMs = (rows: number) => model.estimate(rows, 'slow') + o.overheadMs
  const best = model.bestBatchSize(o.maxBatchSize, false, o.overheadMs)
  const next = Math.min(o.maxBatchSize, best * 2)
  let size = next / batchMs(next) > best / batchMs(best) ? next : best
  while (size > 1 && batchMs(size) > o.deadlineMs / 2) size = Math.max(1, Math.floor(size / 2))
  const ms = batchMs(size)
  return ms > 0 ? (o.slots * size * 1000) / ms : undefined
}

/** Cumulative milliseconds an event loop spent idle and active (performance.eventLoopUtilization()). */
export interface LoopTimes {
  idle: number
  active: number
}

/**
 * The share of wall time a process's event loop was busy over about the last `windowMs`, from the
 * samples taken at each read (a scrape): 1 means the process handles requests as fast as it can,
 * whatever its runners could take — a replica's worth of work for the API process itself.
 */
export class LoopBusy {
  private readonly marks: (LoopTimes & { at: number })[] = []

  constructor(
    private readonly times: () => LoopTimes,
    private readonly now: () => number,
    private readonly windowMs = 10_000,
  ) {}

  /** The busy share since the mark about a window old; the first read only marks (0: start-up is no load). */
  read(): number {
    const at = this.now()
    const t = this.times()
    this.marks.push({ at, idle: t.idle, active: t.active })
    if (this.marks.length === 1) return 0
    // The base is the newest mark at least a window old (or the oldest there is).
    while (this.marks.length > 2 && this.marks[1]!.at <= at - this.windowMs) this.marks.shift()
    const base = this.marks[0]!
    const idle = t.idle - base.idle
    const active = t.active - base.active
    return idle + active > 0 ? active / (idle + active) : 0
  }
}
