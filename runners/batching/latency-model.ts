/**
 * What the dispatcher knows about a runner's speed, learned from the batches it ran:
 * - `estimate(rows)`: expected execution time, from a least-squares line a + b·rows over recent
 *   batches (the deadline arithmetic needs a number for any size);
 * - `bestBatchSize(max)`: the batch size with the highest measured throughput (rows/ms), found by
 *   walking up powers of two while throughput keeps rising. A line can never say "bigger is
 *   slower", and on a 2-core CPU it is (onnxruntime's rec model is slower per row at 32 than at 4).
 */
export interface LatencyModelOptions {
  /** Batches remembered for the line fit. */
  window?: number
  /** Weight of a new observation in a size bucket's moving average. */
  alpha?: number
  /** Throughput must rise by this fraction for a bigger size to count as better. */
  minGain?: number
  /** Every this many batches, the next size up is probed again (hardware and load drift). */
  reprobeEvery?: number
}

interface Bucket {
  rows: number
  ms: number
  samples: number
}

export class LatencyModel {
  private readonly recent: { rows: number; ms: number }[] = []
  private readonly buckets = new Map<number, Bucket>()
  private batches = 0
  private readonly window: number
  private readonly alpha: number
  private readonly minGain: number
  private readonly reprobeEvery: number

  constructor(options: LatencyModelOptions = {}) {
    this.window = options.window ?? 128
    this.alpha = options.alpha ?? 0.2
    this.minGain = options.minGain ?? 0.05
    this.reprobeEvery = options.reprobeEvery ?? 64
  }

  /** Size class of a batch: the next power of two (5 rows count toward 8). */
  static bucketOf(rows: number): number {
    return 2 ** Math.ceil(Math.log2(Math.max(1, rows)))
  }

  observe(rows: number, ms: number): void {
    if (!(rows > 0) || !(ms >= 0)) return
    this.batches++
    this.recent.push({ rows, ms })
    if (this.recent.length > this.window) this.recent.shift()
    const key = LatencyModel.bucketOf(rows)
    const b = this.buckets.get(key)
    if (b === undefined) this.buckets.set(key, { rows, ms, samples: 1 })
    else {
      b.rows += this.alpha * (rows - b.rows)
      b.ms += this.alpha * (ms - b.ms)
      b.samples++
    }
  }

  get observations(): number {
    return this.batches
  }

  /** Expected execution time of a batch of `rows`, in ms (0 before anything was observed). */
  estimate(rows: number): number {
    const n = this.recent.length
    if (n === 0) return 0
    let sx = 0
    let sy = 0
    for (const o of this.recent) {
      sx += o.rows
      sy += o.ms
    }
    const mx = sx / n
    const my = sy / n
    let sxx = 0
    let sxy = 0
    for (const o of this.recent) {
      sxx += (o.rows - mx) ** 2
      sxy += (o.rows - mx) * (o.ms - my)
    }
    if (sxx === 0) return (my / mx) * rows // one size seen so far: assume time grows with rows
    const slope = Math.max(0, sxy / sxx)
    const intercept = Math.max(0, my - slope * mx)
    return intercept + slope * rows
  }

  private throughput(size: number): number | undefined {
    const b = this.buckets.get(size)
    return b === undefined || b.ms <= 0 ? undefined : b.rows / b.ms
  }

  /**
   * The throughput-optimal batch size found so far, or a neighbour of it worth measuring:
   * sizes are powers of two up to `max` (and `max`); with nothing measured, `max`; then the best
   * measured size, except that an unmeasured neighbour (double first, then half) is tried, and
   * every `reprobeEvery` batches a neighbour is measured again.
   */
  bestBatchSize(max: number): number {
    const sizes: number[] = []
    for (let s = 1; s < max; s *= 2) sizes.push(s)
    sizes.push(max)
    const tpOf = (size: number) => this.throughput(LatencyModel.bucketOf(size))
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
    const up = sizes[bestIndex + 1]
    const down = sizes[bestIndex - 1]
    if (up !== undefined && tpOf(up) === undefined) return up
    if (down !== undefined && tpOf(down) === undefined) return down
    if (this.batches > 0 && this.batches % this.reprobeEvery === 0) {
      const neighbour = (this.batches / this.reprobeEvery) % 2 === 1 ? (up ?? down) : (down ?? up)
      if (neighbour !== undefined) return neighbour
    }
    return sizes[bestIndex]!
  }
}
