import type { BundleError } from '../../errors/index.js'
import type { Clock } from './clock.js'
import type { LatencyModel } from './latency-model.js'
import type { Settings } from './options.js'
import { PRIORITY } from './priority.js'
import type { Waiting, WaitQueue } from './queue.js'
import { overloaded } from './refusal.js'
import type { SubmitOptions } from './request.js'
import type { BatchSizer } from './sizing.js'
import type { Workers } from './workers.js'

/**
 * The decision on arrival: take a request, or refuse it at once. Refusing must stay cheaper than
 * serving, so it is decided from counts the queue keeps and estimates already at hand, and a
 * server can ask it before reading a request's body.
 */
export class Admission {
  constructor(
    private readonly settings: Pick<Settings, 'maxQueueSize' | 'deadlineMs' | 'headroomMs' | 'observer'>,
    private readonly queue: Pick<WaitQueue<Waiting>, 'size' | 'rowsAtOrAbove'>,
    private readonly workers: Workers,
    private readonly sizer: BatchSizer,
    private readonly model: LatencyModel,
    private readonly clock: Clock,
  ) {}

  /** The refusal `rows` rows arriving now would get, or undefined (see Dispatcher.refusal). */
  refusal(
    rows: number,
    options: Pick<SubmitOptions, 'deadline' | 'priority'>,
    record: boolean,
  ): BundleError | undefined {
    const { observer } = this.settings
    if (this.queue.size >= this.settings.maxQueueSize) {
      if (record) observer?.rejected('queue_full')
      return overloaded(`the runner queue is full (${this.queue.size} requests waiting)`, 'queue_full')
    }
    const now = this.clock.now()
    const deadline = this.budgetEnd(now, options.deadline)
    const predicted = this.predictedFinish(now, rows, options.priority ?? PRIORITY.normal)
    if (predicted <= deadline) return undefined
    if (record) observer?.rejected('admission')
    // Nothing ahead of it moves before a worker frees up: a client told to come back sooner
    // would only be refused again.
    const pace = Math.max(predicted - deadline, this.workers.soonestFree(now) - now)
    return overloaded(
      `the runner cannot finish this request before its deadline (${Math.round(deadline - now)} ms left, about ` +
        `${Math.round(predicted - now)} ms needed)`,
      'admission',
      pace,
    )
  }

  /** When a request arriving now must have finished running (its deadline less the headroom). */
  budgetEnd(now: number, deadline: number | undefined): number {
    const { deadlineMs, headroomMs } = this.settings
    const end = Math.min(now + deadlineMs, deadline ?? Infinity)
    // A shorter client deadline keeps the same share of it for the way out, not the whole headroom.
    return end - headroomMs * Math.min(1, Math.max(0, end - now) / deadlineMs)
  }

  /**
   * The earliest a request could finish if everything ahead of it (queued at its level or above,
   * and running) went first — `now` while the runner is idle or has no measurements. Admission
   * refuses only what would be late even then: it uses the fastest recent compute times, which a
   * busy machine cannot inflate, so a burst of refusals (each costing CPU) cannot make the
   * estimate refuse still more. Requests admitted that then really cannot make it are shed at
   * dispatch. A backlog is assumed drained with the batch size that clears it soonest (up to
   * maxBatchSize), so a long queue is not mistaken for a hopeless one.
   */
  private predictedFinish(now: number, rows: number, priority: number): number {
    const waiting = this.queue.rowsAtOrAbove(priority)
    const idle = waiting === 0 && this.workers.anyFree()
    if (idle || this.model.observations < 3) return now
    const ahead = waiting + rows
    const best = (n: number) => this.model.estimate(n, 'best')
    const size = this.sizer.drainSize(ahead, Infinity, best)
    const rounds = Math.ceil(Math.ceil(ahead / size) / this.workers.slots)
    // Until a worker is free: what the busy ones hold is expected to end then.
    const busyWait = this.workers.soonestFree(now) - now
    return now + busyWait + rounds * best(Math.min(size, ahead))
  }
}
