import { BundleError } from '../../errors/index.js'
import type { TraceCarrier, TracedPart } from '../tracing/index.js'
import type { Clock } from './clock.js'
import type { LatencyModel } from './latency-model.js'
import type { Settings } from './options.js'
import type { Overhead } from './overhead.js'
import type { WaitQueue } from './queue.js'
import { fail, partDone, type Pending } from './request.js'
import type { Shedding } from './shedding.js'
import type { BatchSizer } from './sizing.js'
import type { Workers } from './workers.js'

/** Rows [start, start + rows) of one submitted request, as they go into a batch. */
export interface Slice<P> {
  payload: P
  start: number
  rows: number
  /** Where the request's trace continues inside the worker (its batch span), when it is traced. */
  trace?: TraceCarrier
}

/**
 * Runs one batch; returns one result per slice, in order. `report` takes the batch's compute
 * time as the runner itself measured it (inside the worker): the batcher learns its speed from
 * that, not from the round trip, which also holds the time the result waited in this process's
 * event loop — under a storm of refused requests that wait can be ten times the compute, and a
 * batcher that learned it would refuse everything (see DESIGN in docs/batching.md).
 */
export type Execute<P, R> = (
  slices: readonly Slice<P>[],
  rows: number,
  report: (computeMs: number) => void,
) => Promise<R[]>

/** What forming and running a batch touches; the dispatcher owns all of it. */
export interface BatchDeps<P, R> {
  settings: Pick<Settings, 'maxBatchSize' | 'observer'>
  queue: WaitQueue<Pending<P, R>>
  workers: Workers
  sizer: BatchSizer
  model: LatencyModel
  overhead: Overhead
  shedding: Shedding<P, R>
  clock: Clock
  execute: Execute<P, R>
  /** A batch came back, answered or failed: a slot is free again. */
  settled: () => void
}

/**
 * One batch, from the queue to its answers: which rows go in (whole requests, one split where it
 * straddles maxBatchSize), then the run, what the latency model learns from it, and each
 * request's parts handed back.
 */
export class BatchRunner<P, R> {
  constructor(private readonly d: BatchDeps<P, R>) {}

  /** Takes up to `rows` rows from the front of `q` (splitting the last request if needed) and runs them. */
  run(q: Pending<P, R>[], rows: number, single: boolean, now: number): void {
    const { slices, owners, taken } = this.form(q, rows, single, now)
    const worker = this.d.workers.took(now, this.d.model.estimate(taken), this.d.model.estimate(taken, 'slow'))
    this.send(slices, owners, taken, worker)
  }

  private form(q: Pending<P, R>[], rows: number, single: boolean, now: number) {
    const { queue, settings, shedding } = this.d
    // `rows` is the size aimed for; requests are taken whole while the batch is below it, and
    // split only where one straddles maxBatchSize (a request is never cut to hit a target).
    const cap = single ? rows : Math.min(rows, settings.maxBatchSize)
    const hard = single ? rows : settings.maxBatchSize
    const finish = this.d.workers.soonestFree(now, true) + this.d.sizer.cost(cap)
    const slices: Slice<P>[] = []
    const owners: Pending<P, R>[] = []
    let taken = 0
    while (q.length > 0 && taken < cap) {
      const item = q[0]!
      // A caller that has gone is not run for (unless part of its request already runs).
      if (item.outstanding === 0 && item.gone?.()) {
        queue.remove(item)
        settings.observer?.cancelled?.(item.rows - item.next)
        fail(item, new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away while the request was queued'))
        continue
      }
      if (shedding.lateInBatch(item, taken, finish)) {
        shedding.shed(item, now)
        continue
      }
      const n = Math.min(item.rows - item.next, hard - taken)
      slices.push({ payload: item.payload, start: item.next, rows: n })
      owners.push(item)
      item.outstanding++
      queue.took(q, item, n)
      taken += n
      if (single) break
    }
    return { slices, owners, taken }
  }

  private send(slices: Slice<P>[], owners: Pending<P, R>[], taken: number, worker: number): void {
    const { clock, model, settings } = this.d
    const started = clock.now()
    const waited = owners.map((o) => started - o.arrived)
    const traced = owners.some((o) => o.trace !== undefined) ? this.traceBatch(slices, owners, taken) : undefined
    let compute: number | undefined
    let result: Promise<R[]>
    try {
      result = this.d.execute(slices, taken, (ms) => (compute = ms))
    } catch (err) {
      result = Promise.reject(err)
    }
    // What execute did before its first wait: the batch's inputs formed and handed to a worker.
    const sent = clock.now()
    result
      .then(
        (results) => {
          const total = clock.now() - started
          // The runner's own measure when it gives one; the rest was the way there and back.
          model.observe(taken, compute ?? total)
          if (compute !== undefined) this.d.overhead.observe(total - compute)
          if (settings.observer) {
            const inputMs = Math.min(sent - started, total)
            const computeMs = Math.min(compute ?? total - inputMs, total - inputMs)
            const stages = { inputMs, computeMs, outputMs: total - inputMs - computeMs }
            settings.observer.batch(taken, waited, total, true, stages)
          }
          slices.forEach((s, i) => {
            const item = owners[i]!
            if (item.timing) {
              item.timing.queueMs += waited[i]!
              item.timing.computeMs += compute ?? total
              item.timing.transferMs += compute === undefined ? 0 : total - compute
            }
            traced?.[i]?.end()
            partDone(item, s.start, results[i]!)
          })
        },
        (err) => {
          settings.observer?.batch(taken, waited, clock.now() - started, false)
          for (const part of traced ?? []) part?.end(err)
          for (const item of owners) {
            item.outstanding--
            // The rest of a split request must not run for nothing.
            this.d.queue.remove(item)
            fail(item, err)
          }
        },
      )
      .finally(() => {
        this.d.workers.returned(worker, clock.now())
        this.d.settled()
      })
  }

  /** Traced requests' batch spans (their queue wait ends here); each slice carries its own to the worker. */
  private traceBatch(slices: Slice<P>[], owners: Pending<P, R>[], taken: number): (TracedPart | undefined)[] {
    const traces = owners.map((o) => o.trace)
    return slices.map((s, i) => {
      const part = traces[i]?.joined(s.rows, taken, traces)
      if (part) s.trace = part.carrier
      return part
    })
  }
}
