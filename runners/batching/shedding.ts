import type { Settings } from './options.js'
import type { WaitQueue } from './queue.js'
import { overloaded } from './refusal.js'
import { fail, type Pending } from './request.js'
import type { BatchSizer } from './sizing.js'

/**
 * Deadline shedding at dispatch: admission judged a request on the best recent times; when its
 * turn comes, one that can no longer finish in time is refused rather than run for nobody.
 */
export class Shedding<P, R> {
  constructor(
    private readonly settings: Pick<Settings, 'deadlineMs' | 'observer'>,
    private readonly queue: WaitQueue<Pending<P, R>>,
    private readonly sizer: BatchSizer,
  ) {}

  /**
   * A queue head that is past its deadline, or that could not finish in the batch of `size` rows
   * it would go into (which starts at `start`, when a worker is free) while others wait behind it.
   * A head alone is run: the worker would idle otherwise. `known`: the model has timed enough
   * batches for its estimates to be trusted.
   */
  lateHead(now: number, head: Pending<P, R>, start: number, size: number, known: boolean): boolean {
    return now >= head.deadline || (known && this.queue.size > 1 && start + this.sizer.cost(size) > head.deadline)
  }

  /**
   * Deadlines differ (a client's own, other levels): a request that the batch ending at `finish`
   * would make late is shed rather than run for nobody — unless it would run alone (`taken`: rows
   * already in the batch), or part of it already runs.
   */
  lateInBatch(item: Pending<P, R>, taken: number, finish: number): boolean {
    return taken > 0 && finish > item.deadline && item.outstanding === 0
  }

  /**
   * Refuses a queued request that can no longer finish in time. Its pace (see refusalPace) is
   * half the deadline: a client that resends at once would join the tail of the very queue it
   * was shed from, so shedding would never shorten it — each shed only adding a body read to the
   * API process, whose CPU the worker shares. The queue turns over in about one deadline; half
   * of one later, it has moved on. (Servers answer paces over 50 ms at once: with deadlines
   * over 100 ms, shedding means real overload, and clients had better go elsewhere.)
   */
  shed(item: Pending<P, R>, now: number): void {
    this.queue.remove(item)
    this.settings.observer?.rejected('deadline')
    fail(
      item,
      overloaded(
        `the request waited ${Math.round(now - item.arrived)} ms and can no longer finish before its deadline`,
        'deadline',
        this.settings.deadlineMs / 2,
      ),
    )
  }
}
