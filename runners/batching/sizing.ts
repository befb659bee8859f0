import type { LatencyModel } from './latency-model.js'
import type { Settings } from './options.js'
import type { Overhead } from './overhead.js'
import type { Workers } from './workers.js'

/**
 * How many rows a batch should hold, and what a batch costs, from what the latency model has
 * measured: the throughput-optimal size, not the configured maximum (rule 5 of Dispatcher).
 */
export class BatchSizer {
  constructor(
    private readonly settings: Pick<Settings, 'batching' | 'maxBatchSize'>,
    private readonly model: LatencyModel,
    private readonly overhead: Overhead,
    private readonly workers: Workers,
  ) {}

  /**
   * The batch size to aim for. The model sometimes proposes a size it has not measured (a
   * probe); its time is extrapolated, and a probe once ran a 405 ms batch where 155 ms were
   * expected, making all eight of its requests late. So a probe is taken only when the oldest
   * request waiting has `slackMs` to spare for twice its pessimistic estimate; otherwise the best
   * measured size.
   */
  target(slackMs = Infinity): number {
    if (!this.settings.batching) return 1
    const max = this.settings.maxBatchSize
    // Compute alone favours small batches; each batch also pays the trip to the runner and back.
    const perBatch = this.overhead.best()
    const proposed = this.model.bestBatchSize(max, true, perBatch)
    if (slackMs === Infinity || this.model.observations < 3) return Math.max(1, proposed)
    const measured = this.model.bestBatchSize(max, false, perBatch)
    return Math.max(
      1,
      proposed === measured || 2 * this.model.estimate(proposed, 'slow') <= slackMs ? proposed : measured,
    )
  }

  /**
   * Batch size for `queued` rows: the throughput-optimal target, doubled (up to maxBatchSize)
   * while the backlog would take longer than `budgetMs` at the current size and a bigger size
   * drains it faster (Infinity: the size that drains `queued` rows soonest).
   */
  drainSize(queued: number, budgetMs: number, estimate = (n: number) => this.model.estimate(n)): number {
    const max = this.settings.maxBatchSize
    let size = Math.min(this.target(budgetMs), max)
    const time = (b: number) => Math.ceil(Math.ceil(queued / b) / this.workers.slots) * estimate(Math.min(b, queued))
    while (size < Math.min(max, queued)) {
      // Never past what is queued: a size the queue cannot fill would be costed as if it could.
      const bigger = Math.min(size * 2, max, queued)
      // Only where a bigger batch really drains faster (on a CPU it may not: see rule 5).
      if (time(bigger) >= time(size) || (budgetMs !== Infinity && time(size) <= budgetMs)) break
      size = bigger
    }
    return size
  }

  /**
   * Execution time of a batch of `rows`, as the shedding decisions see it: compute alone. The trip
   * back to this process is left to the headroom: under a storm of refusals it grows with the
   * storm, and a batcher that counted it would refuse still more (see Admission.predictedFinish).
   */
  cost(rows: number): number {
    return this.model.estimate(Math.min(rows, this.settings.maxBatchSize))
  }
}
