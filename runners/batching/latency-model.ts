/**
 * What the dispatcher knows about a runner's speed, learned from the batches it ran (and from
 * warm-up batches), kept per size class — powers of two, so 5 rows count toward 8:
 * - each class remembers its last `window` batches; its time is their **median**, so one cold
 *   first run or one batch slowed by a noisy neighbour does not move it (a mean or a line fit
 *   over all batches did: a few 50 ms cold batches once made a 2 ms model look hopeless, and a
 *   model that sheds everything never observes again to correct itself);
 * - `estimate(rows)` interpolates linearly between the measured classes and extrapolates from
 *   the nearest two (the deadline arithmetic needs a number for any size);
 * - `bestBatchSize(max)`: the class with the highest measured throughput (rows/ms), found by
 *   walking up powers of two while throughput keeps rising. A line can never say "bigger is
 *   slower", and on a 2-core CPU it is (onnxruntime's rec model is slower per row at 32 than at 4);
 * - with a clock, a class that no batch has refreshed for `staleMs` while others ran is set aside
 *   (see `staleMs`).
 */
export interface LatencyModelOptions {
  /** Batches remembered per size class. */
  window?: number
  /** Throughput must rise by this fraction for a bigger size to count as better. */
  minGain?: number
  /** Without a clock: every this many batches, a neighbour of the best size is probed again. */
  reprobeEvery?: number
  /**
   * The dispatcher's clock (ms). With it, a neighbour of the best size is probed again once
   * `reprobeMs` has passed since the last probe ran — on a clock, so a trickle of batches under a
   * tight deadline re-probes as often as a flood does (a count re-probed a flood every few ms
   * and a trickle hardly ever).
   */
  now?: () => number
  /** With `now`: how long the best size is trusted before a neighbour is measured again. */
  reprobeMs?: number
  /**
   * With `now`: a size class whose newest batch is this much older than the model's newest, with
   * `staleBatches` batches of other sizes run since, is set aside — as if never measured — until a
   * batch of that size runs again (which then starts its times afresh). A class measured once at a
   * bad moment (a warm-up under load, a batch that shared its cores with a burst of refusals)
   * otherwise kept its time for good: under a tight deadline that time said the size could not be
   * afforded, so it was never tried again, and a 20 ms deadline ran batches of two rows where
   * eight fit (0.63–0.74× of the loose goodput).
   * Measured from the newest batch, not the wall clock, and only once others have run for a while:
   * a runner that sat idle forgets nothing when its first request comes back.
   */
  staleMs?: number
  /** See `staleMs` (default 64). */
  staleBatches?: number
}

/** Powers of two below `max`, and `max` itself: the batch sizes the batcher measures and warms up. */
export function batchSizes(max: number): number[] {
  const out: number[] = []
  for (let n = 1; n < max; n *= 2) out.push(n)
  return [...out, max]
}

interface Bucket {
  rows: number[]
  ms: number[]
  /** Next slot to overwrite once the ring is full. */
  at: number
  /** When its newest batch was observed (with a clock), and how many batches of any size had been. */
  seen: number
  seenBatch: number
}

interface Point {
  rows: number
  ms: number
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** The 90th percentile (nearest rank): with the default window of 15, the second slowest. */
const p90 = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(0.9 * xs.length) - 1)]!

type Which = 'typical' | 'best' | 'slow'

export class LatencyModel {
  private readonly buckets = new Map<number, Bucket>()
  private batches = 0
  /** Sorted measured points (median and fastest), rebuilt lazily after an observation. */
  private points: Record<Which, Point[]> | undefined
  /** Each size class's mean rows and median time, rebuilt with `points` (throughput reads it per decision). */
  private typicalOf = new Map<number, Point>()
  private readonly window: number
  private readonly minGain: number
  private readonly reprobeEvery: number
  private readonly now: (() => number) | undefined
  private readonly reprobeMs: number
  private readonly staleMs: number
  private readonly staleBatches: number
  /** When the newest batch of any size was observed (with a clock). */
  private newest = 0
  /** With a clock: when the last probe ran, the size it is waiting for, and how many have run. */
  private probedAt: number | undefined
  private probing: number | undefined
  private probes = 0

  constructor(options: LatencyModelOptions = {}) {
    this.window = options.window ?? 15
    this.minGain = options.minGain ?? 0.05
    this.reprobeEvery = options.reprobeEvery ?? 64
    this.now = options.now
    this.reprobeMs = options.reprobeMs ?? 1000
    this.staleMs = options.staleMs ?? 10_000
    this.staleBatches = options.staleBatches ?? 64
  }

  /** Size class of a batch: the next power of two (5 rows count toward 8). */
  static bucketOf(rows: number): number {
    return 2 ** Math.ceil(Math.log2(Math.max(1, rows)))
  }

  observe(rows: number, ms: number): void {
    if (!(rows > 0) || !(ms >= 0) || !Number.isFinite(ms)) return
    this.batches++
    this.points = undefined
    const key = LatencyModel.bucketOf(rows)
    if (this.now !== undefined && (this.probedAt === undefined || key === this.probing)) {
      // The first batch starts the clock; a probe counts once its size has run.
      if (this.probedAt !== undefined) this.probes++
      this.probedAt = this.now()
      this.probing = undefined
    }
    const now = this.now?.() ?? 0
    let b = this.buckets.get(key)
    // A class set aside as stale starts afresh: its old times are what kept it from running.
    if (b === undefined || this.stale(b))
      this.buckets.set(key, (b = { rows: [], ms: [], at: 0, seen: now, seenBatch: this.batches }))
    b.seen = now
    b.seenBatch = this.batches
    this.newest = Math.max(this.newest, now)
    if (b.ms.length < this.window) {
      b.rows.push(rows)
      b.ms.push(ms)
    } else {
      b.rows[b.at] = rows
      b.ms[b.at] = ms
      b.at = (b.at + 1) % this.window
    }
  }

  get observations(): number {
    return this.batches
  }

  /** No batch of this class ran for `staleMs` while others did (never, without a clock). */
  private stale(b: Bucket): boolean {
    return (
      this.now !== undefined && this.newest - b.seen > this.staleMs && this.batches - b.seenBatch > this.staleBatches
    )
  }

  private measured(which: Which): Point[] {
    if (this.points === undefined) {
      const live = [...this.buckets].filter(([, b]) => !this.stale(b))
      const buckets = live.map(([, b]) => b).sort((a, b) => a.rows[0]! - b.rows[0]!)
      const rows = (b: Bucket) => b.rows.reduce((s, r) => s + r, 0) / b.rows.length
      this.typicalOf = new Map(live.map(([size, b]) => [size, { rows: rows(b), ms: median(b.ms) }]))
      this.points = {
        typical: buckets.map((b) => this.typicalOf.get(LatencyModel.bucketOf(b.rows[0]!))!),
        best: buckets.map((b) => ({ rows: rows(b), ms: Math.min(...b.ms) })),
        slow: buckets.map((b) => ({ rows: rows(b), ms: p90(b.ms) })),
      }
    }
    return this.points[which]
  }

  /**
   * Execution time of a batch of `rows`, in ms (0 before anything was observed): `typical` from
   * the median of recent batches; `best` from the fastest — what the runner can do when it is not
   * slowed by the load around it (admission control uses it: see Dispatcher.submit); `slow` from
   * the 90th percentile — what a batch must be able to afford to finish in time nine times in
   * ten (whether a batch size not measured yet may be tried uses it).
   */
  estimate(rows: number, which: Which = 'typical'): number {
    const p = this.measured(which)
    if (p.length === 0) return 0
    if (p.length === 1) return (p[0]!.ms / p[0]!.rows) * rows // one size seen so far: time grows with rows
    // The segment that holds `rows`, or the nearest one at either end.
    let i = 0
    while (i < p.length - 2 && rows > p[i + 1]!.rows) i++
    const a = p[i]!
    const b = p[i + 1]!
    const slope = Math.max(0, (b.ms - a.ms) / (b.rows - a.rows))
    // Below the smallest measured size a batch is not assumed faster than that size's per-row cost.
    const floor = rows < a.rows ? (a.ms / a.rows) * rows : 0
    return Math.max(floor, a.ms + slope * (rows - a.rows))
  }

  /** Rows per ms at a size class, each batch also paying `perBatchMs` (the way to the runner and back). */
  private throughput(size: number, perBatchMs = 0): number | undefined {
    this.measured('typical')
    const t = this.typicalOf.get(size)
    if (t === undefined) return undefined
    const ms = t.ms + perBatchMs
    return ms <= 0 ? undefined : t.rows / ms
  }

  /**
   * The throughput-optimal batch size found so far, or a neighbour of it worth measuring:
   * sizes are powers of two up to `max` (and `max`); with nothing measured, `max`; then the best
   * measured size, except that an unmeasured neighbour (double first, then half) is tried, and
   * a neighbour is measured again now and then (see `now`). `explore: false` returns the best
   * measured size only (no probe: a probe's time is a guess). `perBatchMs`: what every batch
   * costs besides its compute (the trip to the runner and back), which bigger batches amortise.
   */
  bestBatchSize(max: number, explore = true, perBatchMs = 0): number {
    const sizes = batchSizes(max)
    const tpOf = (size: number) => this.throughput(LatencyModel.bucketOf(size), perBatchMs)
    let bestIndex = -1
    let bestTp = 0
    sizes.forEach((size, i) => {
      const tp = tpOf(size)
      // A bigger size must beat the best by minGain: equal throughput is not worth the latency.
      if (tp !== undefined && (bestIndex < 0 || tp > bestTp * (1 + this.minGain))) {
        bestIndex = i
        bestTp = tp
      }
    })
    if (bestIndex < 0) return max
    if (!explore) return sizes[bestIndex]!
    const up = sizes[bestIndex + 1]
    const down = sizes[bestIndex - 1]
    if (up !== undefined && tpOf(up) === undefined) return up
    if (down !== undefined && tpOf(down) === undefined) return down
    const neighbour = this.reprobe(up, down)
    return neighbour ?? sizes[bestIndex]!
  }

  /** A neighbour of the best size that is due to be measured again, bigger and smaller in turn. */
  private reprobe(up: number | undefined, down: number | undefined): number | undefined {
    if (this.now === undefined) {
      if (this.batches === 0 || this.batches % this.reprobeEvery !== 0) return undefined
      return (this.batches / this.reprobeEvery) % 2 === 1 ? (up ?? down) : (down ?? up)
    }
    if (this.probedAt === undefined || this.now() - this.probedAt < this.reprobeMs) return undefined
    // Due until a batch of that size runs: the sizer may decline a probe the deadline cannot afford.
    const neighbour = this.probes % 2 === 0 ? (up ?? down) : (down ?? up)
    this.probing = neighbour === undefined ? undefined : LatencyModel.bucketOf(neighbour)
    return neighbour
  }
}
