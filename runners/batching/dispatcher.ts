import { BundleError } from '../../errors/index.js'
import { realClock, type Clock } from './clock.js'
import { LatencyModel } from './latency-model.js'

/** Rows [start, start + rows) of one submitted request, as they go into a batch. */
export interface Slice<P> {
  payload: P
  start: number
  rows: number
}

/** Runs one batch; returns one result per slice, in order. */
export type Execute<P, R> = (slices: readonly Slice<P>[], rows: number) => Promise<R[]>

/** Hooks for metrics; the dispatcher itself stays free of any metrics library. */
export interface DispatchObserver {
  /** A batch finished: its rows, how long each of its requests waited, how long it ran (ms). */
  batch(rows: number, waitedMs: readonly number[], executionMs: number, ok: boolean): void
  rejected(reason: RejectReason): void
}

/**
 * Why a request was shed: `queue_full` — the memory bound on waiting rows; `admission` — on
 * arrival, the work already queued ahead could not finish in time; `deadline` — it waited and
 * could no longer finish within maxLatencyMs in the batch it would go into.
 */
export type RejectReason = 'queue_full' | 'admission' | 'deadline'

export interface DispatcherOptions {
  observer?: DispatchObserver
  /** Most rows in one batch. */
  maxBatchSize: number
  /** No request may wait plus run longer than this; those that would are shed. */
  maxLatencyMs: number
  /**
   * Part of maxLatencyMs the dispatcher keeps for the way in and out of the runner — decoding
   * the request, IPC, writing the answer — so that the bound holds as the client measures it,
   * not just inside the queue. Default 10% of maxLatencyMs, at most 50 ms.
   */
  headroomMs?: number
  /** Batches that may run at once (one per worker). */
  slots: number
  /** false: every request runs alone, in arrival order. */
  batching?: boolean
  /** Rows that may wait in total (memory bound); more are shed at once. Default 64 × maxBatchSize. */
  maxQueueRows?: number
  clock?: Clock
  model?: LatencyModel
}

interface Pending<P, R> {
  payload: P
  rows: number
  key: string
  arrived: number
  deadline: number
  /** Rows not yet handed to a batch. */
  next: number
  parts: { start: number; result: R }[]
  outstanding: number
  failed: boolean
  resolve: (parts: R[]) => void
  reject: (err: unknown) => void
}

export interface DispatcherStats {
  queuedRows: number
  inFlight: number
  /** The batch size the batcher currently aims for (measured, not configured). */
  targetBatchSize: number
  /** Batches the latency model has timed (warm-up included). */
  observations: number
}

const overloaded = (why: string) => new BundleError('E_RUNNER_OVERLOADED', why)

/**
 * Adaptive batching for one runner method. Requests queue per input shape (`key`); when a
 * slot is free it decides — from the latency model and the arrival rate — whether to run what
 * is queued now or wait for more rows:
 * 1. it waits only while waiting is expected to raise throughput, and never past the point
 *    where the oldest request could still run within maxLatencyMs;
 * 2. requests that cannot finish within maxLatencyMs are rejected (E_RUNNER_OVERLOADED) at
 *    submit or before they run — shed, never left hanging;
 * 3. batches hold at most maxBatchSize rows; a request that straddles the cap is split and its
 *    parts are returned in order;
 * 4. only requests with the same key (non-batch dimensions, dtype) share a batch;
 * 5. the batch size aimed for is the throughput-optimal one the model measured, not the max;
 * 6. one batch per slot; a freed slot takes the next batch.
 * Deadlines are set `headroomMs` short of maxLatencyMs (see DispatcherOptions).
 * Pure logic with an injectable clock: the tests drive it with fake time.
 */
export class Dispatcher<P, R> {
  private readonly queues = new Map<string, Pending<P, R>[]>()
  private queuedRows = 0
  private busy = 0
  private timer: unknown
  private lastArrival: number | undefined
  private arrivals = 0
  /** Arrivals counted when the current wait began: a wait that brought nothing is not repeated. */
  private waitArrivals = -1
  /** Arrival rate in rows per ms (moving average). */
  private rate = 0
  private closed = false
  /** Set by drain(): resolves once nothing is queued or running. */
  private drained: (() => void) | undefined
  private draining: Promise<void> | undefined
  readonly model: LatencyModel
  private readonly clock: Clock
  private readonly batching: boolean
  private readonly maxQueueRows: number
  /** What a request may spend queued plus running: maxLatencyMs less the headroom. */
  private readonly budgetMs: number

  constructor(
    private options: DispatcherOptions,
    private readonly execute: Execute<P, R>,
  ) {
    if (!(options.maxBatchSize >= 1) || !(options.maxLatencyMs > 0) || !(options.slots >= 1)) throw new Error('maxBatchSize, maxLatencyMs and slots must be positive')
    this.clock = options.clock ?? realClock
    this.model = options.model ?? new LatencyModel()
    this.batching = options.batching ?? true
    this.maxQueueRows = options.maxQueueRows ?? 64 * options.maxBatchSize
    const headroom = options.headroomMs ?? Math.min(50, options.maxLatencyMs * 0.1)
    if (!(headroom >= 0 && headroom < options.maxLatencyMs)) throw new Error('headroomMs must be at least 0 and below maxLatencyMs')
    this.budgetMs = options.maxLatencyMs - headroom
  }

  /** Batches that may run at once changes with the number of workers (autoscaling). */
  setSlots(slots: number): void {
    if (!(slots >= 1)) throw new Error('slots must be positive')
    this.options.slots = slots
    this.schedule()
  }

  stats(): DispatcherStats {
    return { queuedRows: this.queuedRows, inFlight: this.busy, targetBatchSize: this.target(), observations: this.model.observations }
  }

  /**
   * The batch size to aim for. The model sometimes proposes a size it has not measured (a
   * probe); its time is extrapolated, and a probe once ran a 405 ms batch where 155 ms were
   * expected, making all eight of its requests late. So a probe is taken only when the oldest
   * request waiting has `slackMs` to spare for twice its pessimistic estimate; otherwise the best
   * measured size.
   */
  private target(slackMs = Infinity): number {
    if (!this.batching) return 1
    const max = this.options.maxBatchSize
    const proposed = this.model.bestBatchSize(max)
    if (slackMs === Infinity || this.model.observations < 3) return Math.max(1, proposed)
    const measured = this.model.bestBatchSize(max, false)
    return Math.max(1, proposed === measured || 2 * this.model.estimate(proposed, 'slow') <= slackMs ? proposed : measured)
  }

  /** Queues `rows` rows of one request; resolves with its results, one per slice, in row order. */
  submit(payload: P, rows: number, key = ''): Promise<R[]> {
    if (this.closed) return Promise.reject(new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
    if (!Number.isInteger(rows) || rows < 1) return Promise.reject(new Error(`rows must be a positive integer, got ${rows}`))
    const now = this.clock.now()
    if (this.lastArrival !== undefined) {
      const gap = Math.max(now - this.lastArrival, 0.001)
      this.rate += 0.2 * (rows / gap - this.rate)
    }
    this.lastArrival = now
    this.arrivals++
    if (this.queuedRows + rows > this.maxQueueRows) {
      this.options.observer?.rejected('queue_full')
      return Promise.reject(overloaded(`the runner queue is full (${this.queuedRows} rows waiting)`))
    }
    // Admission control needs work ahead to predict from: an idle runner always takes the
    // request (running it is also how a pessimistic latency model gets corrected).
    const ahead = this.queuedRows > 0 || this.busy >= this.options.slots
    const predicted = ahead ? this.predictedFinish(now, rows) : now
    if (predicted > now + this.budgetMs) {
      this.options.observer?.rejected('admission')
      return Promise.reject(overloaded(`the runner cannot finish this request within ${this.options.maxLatencyMs} ms (about ${Math.round(predicted - now)} ms expected)`))
    }
    return new Promise<R[]>((resolve, reject) => {
      const item: Pending<P, R> = { payload, rows, key, arrived: now, deadline: now + this.budgetMs, next: 0, parts: [], outstanding: 0, failed: false, resolve, reject }
      let q = this.queues.get(key)
      if (q === undefined) this.queues.set(key, (q = []))
      q.push(item)
      this.queuedRows += rows
      this.schedule()
    })
  }

  /**
   * The earliest the request could finish if everything queued ahead ran first (now, until the
   * model has data). Admission rejects only requests that would be late even then: times
   * measured under load include the load itself — CPU taken by the very requests being turned
   * away — so a typical-time prediction feeds on itself (shed → clients retry at once → more
   * CPU spent answering 503s → slower batches → more shed) and once turned a 2-core server
   * that could serve ~500 req/s into one serving ~50. Requests admitted on the optimistic
   * prediction that then really cannot make it are shed at dispatch, by the typical estimate.
   * A backlog is assumed drained with the batch size that clears it soonest (up to
   * maxBatchSize), so a long queue is not mistaken for a hopeless one.
   */
  private predictedFinish(now: number, rows: number): number {
    if (this.model.observations < 3) return now
    const ahead = this.queuedRows + rows
    const best = (n: number) => this.model.estimate(n, 'best')
    const size = this.drainSize(ahead, Infinity, best)
    const rounds = Math.ceil(Math.ceil(ahead / size) / this.options.slots)
    // A busy slot is on average half way through its batch.
    const busyWait = this.busy >= this.options.slots ? best(size) / 2 : 0
    return now + busyWait + rounds * best(Math.min(size, ahead))
  }

  /**
   * Batch size for `queued` rows: the throughput-optimal target, doubled (up to maxBatchSize)
   * while the backlog would take longer than `budgetMs` at the current size and a bigger size
   * drains it faster (Infinity: the size that drains `queued` rows soonest).
   */
  private drainSize(queued: number, budgetMs: number, estimate = (n: number) => this.model.estimate(n)): number {
    const max = this.options.maxBatchSize
    let size = Math.min(this.target(budgetMs), max)
    const time = (b: number) => Math.ceil(Math.ceil(queued / b) / this.options.slots) * estimate(Math.min(b, queued))
    while (size < Math.min(max, queued)) {
      const bigger = Math.min(size * 2, max)
      // Only where a bigger batch really drains faster (on a CPU it may not: see rule 5).
      if (time(bigger) >= time(size) || (budgetMs !== Infinity && time(size) <= budgetMs)) break
      size = bigger
    }
    return size
  }

  /** Stops taking requests; queued ones are rejected, running batches finish. */
  close(): void {
    this.closed = true
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer)
    for (const q of this.queues.values()) for (const item of q) this.fail(item, new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
    this.queues.clear()
    this.queuedRows = 0
  }

  /**
   * Stops taking requests and runs what is queued without waiting for more rows; resolves
   * once every queued and running batch has finished (graceful shutdown: nothing accepted is lost).
   */
  drain(): Promise<void> {
    this.closed = true
    // Idempotent: every caller (a swap, a stop, a shutdown) waits for the same end.
    this.draining ??= new Promise<void>((resolve) => (this.drained = resolve))
    this.schedule(true)
    this.checkDrained()
    return this.draining
  }

  private checkDrained(): void {
    if (this.drained !== undefined && this.queuedRows === 0 && this.busy === 0) {
      this.drained()
      this.drained = undefined
    }
  }

  private fail(item: Pending<P, R>, err: unknown): void {
    if (item.failed) return
    item.failed = true
    item.reject(err)
  }

  /** The queue whose head has waited longest. */
  private oldestQueue(): Pending<P, R>[] | undefined {
    let best: Pending<P, R>[] | undefined
    for (const q of this.queues.values()) if (q.length > 0 && (best === undefined || q[0]!.arrived < best[0]!.arrived)) best = q
    return best
  }

  private schedule(afterWait = false): void {
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer)
      this.timer = undefined
    }
    // A wait during which nothing arrived showed the rate estimate was stale: run what is
    // queued. Draining never waits either.
    const noMoreWaiting = (afterWait && this.arrivals === this.waitArrivals) || this.closed
    while (this.busy < this.options.slots) {
      const q = this.oldestQueue()
      if (q === undefined) return
      const now = this.clock.now()
      const head = q[0]!
      const headRows = head.rows - head.next
      const target = this.target(head.deadline - now)
      const queued = q.reduce((n, it) => n + it.rows - it.next, 0)
      const known = this.model.observations >= 3
      // The batch that would run now: the head alone without batching; a full target batch
      // (bigger under a backlog that target-sized batches cannot clear before the oldest
      // deadline: latency first, then throughput); or, short of target, what is queued.
      const size = !this.batching ? headRows : queued >= target ? (known ? this.drainSize(queued, head.deadline - now) : target) : queued
      // Shed a head that is past its deadline, or that could not finish in that batch while
      // others wait behind it (the head has the earliest deadline of its queue, so the rest of
      // the batch is safe; and a head alone is run: the worker would idle otherwise).
      const late = now >= head.deadline || (known && this.queuedRows > headRows && now + this.model.estimate(Math.min(size, this.options.maxBatchSize)) > head.deadline)
      if (late) {
        q.shift()
        this.queuedRows -= headRows
        this.options.observer?.rejected('deadline')
        this.fail(head, overloaded(`the request waited ${Math.round(now - head.arrived)} ms and can no longer finish within ${this.options.maxLatencyMs} ms`))
        continue
      }
      if (!this.batching) {
        this.dispatch(q, headRows, true)
        continue
      }
      if (queued >= target) {
        this.dispatch(q, size, false)
        continue
      }
      const wait = noMoreWaiting ? 0 : this.worthWaiting(now, head, queued, target)
      if (wait > 0) {
        this.waitArrivals = this.arrivals
        this.timer = this.clock.setTimeout(() => {
          this.timer = undefined
          this.schedule(true)
        }, wait)
        return
      }
      this.dispatch(q, queued, false)
    }
  }

  /**
   * How long to hold `queued` rows hoping to reach `target` (0 = run now). Waiting must fit in
   * the oldest request's deadline and must raise throughput: target rows after the wait beat
   * the queued rows now.
   */
  private worthWaiting(now: number, head: Pending<P, R>, queued: number, target: number): number {
    if (this.rate <= 0 || this.model.observations === 0) return 0
    // Silence since the last arrival lowers the rate: a burst long past says little about now.
    const silence = now - (this.lastArrival ?? now)
    const rate = silence > 0 ? Math.min(this.rate, 1 / silence) : this.rate
    const fill = (target - queued) / rate
    const slack = head.deadline - now - this.model.estimate(target)
    if (fill > slack) return 0
    const nowThroughput = queued / Math.max(this.model.estimate(queued), 1e-6)
    const laterThroughput = target / (fill + Math.max(this.model.estimate(target), 1e-6))
    return laterThroughput > nowThroughput ? Math.max(fill, 0.05) : 0
  }

  /** Takes up to `rows` rows from the front of `q` (splitting the last request if needed) and runs them. */
  private dispatch(q: Pending<P, R>[], rows: number, single: boolean): void {
    // `rows` is the size aimed for; requests are taken whole while the batch is below it, and
    // split only where one straddles maxBatchSize (a request is never cut to hit a target).
    const cap = single ? rows : Math.min(rows, this.options.maxBatchSize)
    const hard = single ? rows : this.options.maxBatchSize
    const slices: Slice<P>[] = []
    const owners: Pending<P, R>[] = []
    let taken = 0
    while (q.length > 0 && taken < cap) {
      const item = q[0]!
      const n = Math.min(item.rows - item.next, hard - taken)
      slices.push({ payload: item.payload, start: item.next, rows: n })
      owners.push(item)
      item.next += n
      item.outstanding++
      taken += n
      if (item.next === item.rows) q.shift()
      if (single) break
    }
    this.queuedRows -= taken
    this.busy++
    const started = this.clock.now()
    const waited = owners.map((o) => started - o.arrived)
    let result: Promise<R[]>
    try {
      result = this.execute(slices, taken)
    } catch (err) {
      result = Promise.reject(err)
    }
    result.then(
      (results) => {
        this.model.observe(taken, this.clock.now() - started)
        this.options.observer?.batch(taken, waited, this.clock.now() - started, true)
        slices.forEach((s, i) => {
          const item = owners[i]!
          item.outstanding--
          item.parts.push({ start: s.start, result: results[i]! })
          if (!item.failed && item.outstanding === 0 && item.next === item.rows) {
            item.parts.sort((a, b) => a.start - b.start)
            item.resolve(item.parts.map((p) => p.result))
          }
        })
      },
      (err) => {
        this.options.observer?.batch(taken, waited, this.clock.now() - started, false)
        for (const item of owners) {
          // The rest of a split request must not run for nothing.
          if (item.next < item.rows) {
            const iq = this.queues.get(item.key)
            const at = iq?.indexOf(item) ?? -1
            if (at >= 0) {
              iq!.splice(at, 1)
              this.queuedRows -= item.rows - item.next
            }
          }
          this.fail(item, err)
        }
      },
    ).finally(() => {
      this.busy--
      this.schedule()
      this.checkDrained()
    })
  }
}
