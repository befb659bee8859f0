import { BundleError } from '../../errors/index.js'
import { realClock, type Clock } from './clock.js'
import { LatencyModel } from './latency-model.js'
import { PRIORITY } from './priority.js'
import { WaitQueue, type Waiting } from './queue.js'

/** Rows [start, start + rows) of one submitted request, as they go into a batch. */
export interface Slice<P> {
  payload: P
  start: number
  rows: number
}

/**
 * Runs one batch; returns one result per slice, in order. `report` takes the batch's compute
 * time as the runner itself measured it (inside the worker): the batcher learns its speed from
 * that, not from the round trip, which also holds the time the result waited in this process's
 * event loop — under a storm of refused requests that wait can be ten times the compute, and a
 * batcher that learned it would refuse everything (see DESIGN in docs/batching.md).
 */
export type Execute<P, R> = (slices: readonly Slice<P>[], rows: number, report: (computeMs: number) => void) => Promise<R[]>

/** Hooks for metrics; the dispatcher itself stays free of any metrics library. */
export interface DispatchObserver {
  /** A batch finished: its rows, how long each of its requests waited, how long it ran (ms). */
  batch(rows: number, waitedMs: readonly number[], executionMs: number, ok: boolean): void
  rejected(reason: RejectReason): void
}

/**
 * Why a request was shed: `queue_full` — more than maxQueueSize requests wait; `admission` — on
 * arrival, the work queued ahead (at its priority or above) could not finish before its
 * deadline; `deadline` — it waited and could no longer finish in time in the batch it would go into.
 */
export type RejectReason = 'queue_full' | 'admission' | 'deadline'

export interface DispatcherOptions {
  observer?: DispatchObserver
  /** Most rows in one batch. */
  maxBatchSize: number
  /**
   * The batch window: the longest a request is held back to let a batch fill (Triton's
   * max_queue_delay). Below it the wait is adaptive — only while more rows are expected soon and
   * a fuller batch raises throughput; an idle runner with nothing else coming runs at once.
   * Default 10 ms; 0 never waits.
   */
  maxDelayMs?: number
  /**
   * The longest a request may spend queued plus running; a request that cannot make it is
   * refused early (E_RUNNER_OVERLOADED), never run and thrown away. A request's own deadline
   * (submit's `deadline`: a client's timeout) can only shorten it.
   */
  deadlineMs?: number
  /** @deprecated the pre-split name of deadlineMs. */
  maxLatencyMs?: number
  /**
   * Part of the deadline kept for the way in and out of the runner — decoding, IPC, the answer —
   * so the bound holds as the client measures it. Default 10% of the deadline, at most 50 ms.
   */
  headroomMs?: number
  /** Batches that may run at once (one per worker). */
  slots: number
  /**
   * Batches a worker may hold at once (its pool's depth, default 1): with 2, the next batch is
   * handed over shortly before the worker is expected to finish the current one (or at once if
   * a full batch waits), so the worker does not idle while this process takes its answer.
   */
  depth?: number
  /** false: every request runs alone, by priority then arrival. */
  batching?: boolean
  /** Requests that may wait (memory bound); more are shed at once. Default 64 × maxBatchSize. */
  maxQueueSize?: number
  clock?: Clock
  model?: LatencyModel
}

/** What a caller may say about one request. */
/**
 * Time a request's runner calls spent, summed over its calls and batches, in ms: waiting in
 * the queue, computing in the worker (as the worker measured it), and getting there and back
 * (the batch's round trip less its compute: IPC, shared memory, the worker's turn).
 */
export interface StageTimes {
  queueMs: number
  computeMs: number
  transferMs: number
}

export interface SubmitOptions {
  /** Requests share a batch only with the same key (input shape, dtype). */
  key?: string
  /** When the caller stops waiting, on the dispatcher's clock: shortens deadlineMs, never extends it. */
  deadline?: number | undefined
  /** 1 (most urgent) to 9; default 5 (PRIORITY.normal). */
  priority?: number | undefined
  /** Aborted: a request still queued leaves the queue and fails (its caller has gone). */
  signal?: AbortSignal | undefined
  /**
   * Asked when the request's turn comes: true means its caller has gone (a closed connection),
   * and its rows are not run. Cheaper than a signal when most callers stay.
   */
  gone?: (() => boolean) | undefined
  /** Where this request's queue, compute and transfer times are added (see StageTimes). */
  timing?: StageTimes | undefined
}

interface Pending<P, R> extends Waiting {
  payload: P
  gone?: (() => boolean) | undefined
  timing?: StageTimes | undefined
  parts: { start: number; result: R }[]
  outstanding: number
  failed: boolean
  resolve: (parts: R[]) => void
  reject: (err: unknown) => void
  unlisten?: () => void
}

export interface DispatcherStats {
  queuedRows: number
  queuedRequests: number
  inFlight: number
  /** The batch size the batcher currently aims for (measured, not configured). */
  targetBatchSize: number
  /** Batches the latency model has timed (warm-up included). */
  observations: number
  /** Time a batch spends outside the runner's compute (IPC, event loop), best recent, ms. */
  overheadMs: number
}

export const DEFAULT_MAX_DELAY_MS = 10
export const DEFAULT_DEADLINE_MS = 10_000

const PACE = Symbol.for('modelbundle.refusalPaceMs')

/**
 * The refusal of a request a runner cannot take in time. It costs next to nothing (a storm of
 * them is exactly when CPU is short): no stack. `paceMs`: how much later than its deadline it
 * would have finished — about when room opens for it (see refusalPace).
 */
export function overloaded(why: string, paceMs?: number): BundleError {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    const err = new BundleError('E_RUNNER_OVERLOADED', why)
    if (paceMs !== undefined) Object.defineProperty(err, PACE, { value: paceMs })
    return err
  } finally {
    Error.stackTraceLimit = limit
  }
}

/**
 * For a request refused on arrival: how long until the runner would probably have room for it
 * (how much later than its deadline it would have finished had it been queued). A server answers
 * such a refusal no sooner than that, when it is short: a client that resends the moment it is
 * refused then comes back when its request can be taken, instead of spinning through refusals
 * that take the CPU the runner needs (see docs/batching.md, "No collapse").
 */
export function refusalPace(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null ? (err as Record<symbol, number | undefined>)[PACE] : undefined
}

/** Recent batch overheads (round trip less compute): the best of them is what the path costs unloaded. */
class Overhead {
  private readonly ring: number[] = []
  private at = 0
  observe(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return
    if (this.ring.length < 32) this.ring.push(ms)
    else this.ring[this.at++ % 32] = ms
  }
  best(): number {
    return this.ring.length ? Math.min(...this.ring) : 0
  }
  /** The median: how long an answer usually takes to come back (a busy event loop shows here). */
  typical(): number {
    if (this.ring.length === 0) return 0
    const s = [...this.ring].sort((a, b) => a - b)
    return s[s.length >> 1]!
  }
}

/**
 * Adaptive batching for one runner method. Requests queue per input shape (`key`) and priority;
 * when a slot is free it decides — from the latency model and the arrival rate — whether to run
 * what is queued now or wait for more rows:
 * 1. it waits only while waiting is expected to raise throughput, never longer than maxDelayMs
 *    after the oldest request arrived, and never past the point where that request could
 *    still finish before its deadline;
 * 2. requests that cannot finish before their deadline are refused (E_RUNNER_OVERLOADED) at
 *    submit or before they run — shed, never left hanging, never run to be thrown away;
 * 3. batches hold at most maxBatchSize rows; a request that straddles the cap is split and its
 *    parts are returned in order;
 * 4. only requests with the same key (non-batch dimensions, dtype) share a batch;
 * 5. the batch size aimed for is the throughput-optimal one the model measured, not the max;
 * 6. one batch per slot; a freed slot takes the next batch;
 * 7. more urgent priority levels go first, into the batch and out of the queue.
 * Its speed is learned from compute times the runner reports, so a busy event loop here does not
 * make it think the model slow. Pure logic with an injectable clock: tests drive it with fake time.
 */
export class Dispatcher<P, R> {
  private readonly queue = new WaitQueue<Pending<P, R>>()
  private busy = 0
  private timer: unknown
  private lastArrival: number | undefined
  private arrivals = 0
  private seq = 0
  /** Arrivals counted when the current wait began: a wait that brought nothing is not repeated. */
  private waitArrivals = -1
  /** Arrival rate in rows per ms (moving average). */
  private rate = 0
  private closed = false
  /** Set by drain(): resolves once nothing is queued or running. */
  private drained: (() => void) | undefined
  private draining: Promise<void> | undefined
  readonly model: LatencyModel
  private readonly overhead = new Overhead()
  /** When each worker is expected to have finished what it holds (a model of the pool's assignment). */
  private workerEnds: number[] = []
  /** The same, from the slow (p90) batch times: when a batch handed over early may start at the latest. */
  private workerEndsSlow: number[] = []
  private readonly depth: number
  private readonly clock: Clock
  private readonly batching: boolean
  private readonly maxQueueSize: number
  private readonly maxDelayMs: number
  readonly deadlineMs: number
  private readonly headroomMs: number

  constructor(
    private options: DispatcherOptions,
    private readonly execute: Execute<P, R>,
  ) {
    this.deadlineMs = options.deadlineMs ?? options.maxLatencyMs ?? DEFAULT_DEADLINE_MS
    this.maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS
    if (!(options.maxBatchSize >= 1) || !(this.deadlineMs > 0) || !(options.slots >= 1) || !(this.maxDelayMs >= 0)) throw new Error('maxBatchSize, deadlineMs and slots must be positive, maxDelayMs at least 0')
    this.clock = options.clock ?? realClock
    this.model = options.model ?? new LatencyModel()
    this.batching = options.batching ?? true
    this.depth = Math.max(1, options.depth ?? 1)
    this.maxQueueSize = options.maxQueueSize ?? 64 * options.maxBatchSize
    this.headroomMs = options.headroomMs ?? Math.min(50, this.deadlineMs * 0.1)
    if (!(this.headroomMs >= 0 && this.headroomMs < this.deadlineMs)) throw new Error('headroomMs must be at least 0 and below the deadline')
  }

  /** Batches that may run at once changes with the number of workers (autoscaling). */
  setSlots(slots: number): void {
    if (!(slots >= 1)) throw new Error('slots must be positive')
    this.options.slots = slots
    this.schedule()
  }

  stats(): DispatcherStats {
    return { queuedRows: this.queue.rows, queuedRequests: this.queue.size, inFlight: this.busy, targetBatchSize: this.target(), observations: this.model.observations, overheadMs: this.overhead.best() }
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
    // Compute alone favours small batches; each batch also pays the trip to the runner and back.
    const perBatch = this.overhead.best()
    const proposed = this.model.bestBatchSize(max, true, perBatch)
    if (slackMs === Infinity || this.model.observations < 3) return Math.max(1, proposed)
    const measured = this.model.bestBatchSize(max, false, perBatch)
    return Math.max(1, proposed === measured || 2 * this.model.estimate(proposed, 'slow') <= slackMs ? proposed : measured)
  }

  /**
   * Admits would-be `rows` rows at `priority` now, given work queued at that level and above?
   * The same test submit() applies, without queueing anything: a server asks it before reading
   * a request's body, so a refusal costs next to nothing.
   */
  admits(rows = 1, options: Pick<SubmitOptions, 'deadline' | 'priority'> = {}): boolean {
    return this.refusal(rows, options, false) === undefined
  }

  /**
   * The refusal a request arriving now would get (undefined: it would be queued): queue full,
   * or work at its level and above that would not let it finish before its deadline. `record`:
   * count it as refused (the caller answers with it).
   */
  refusal(rows = 1, options: Pick<SubmitOptions, 'deadline' | 'priority'> = {}, record = true): BundleError | undefined {
    if (this.closed) return undefined // the call itself says it is stopping
    if (this.queue.size >= this.maxQueueSize) {
      if (record) this.options.observer?.rejected('queue_full')
      return overloaded(`the runner queue is full (${this.queue.size} requests waiting)`)
    }
    const now = this.clock.now()
    const deadline = this.budgetEnd(now, options.deadline)
    const predicted = this.predictedFinish(now, rows, options.priority ?? PRIORITY.normal)
    if (predicted <= deadline) return undefined
    if (record) this.options.observer?.rejected('admission')
    // Nothing ahead of it moves before a worker frees up: a client told to come back sooner
    // would only be refused again.
    const pace = Math.max(predicted - deadline, this.soonestFree(now) - now)
    return overloaded(`the runner cannot finish this request before its deadline (${Math.round(deadline - now)} ms left, about ${Math.round(predicted - now)} ms needed)`, pace)
  }

  /** When a request arriving now must have finished running (its deadline less the headroom). */
  private budgetEnd(now: number, deadline: number | undefined): number {
    const end = Math.min(now + this.deadlineMs, deadline ?? Infinity)
    // A shorter client deadline keeps the same share of it for the way out, not the whole headroom.
    return end - this.headroomMs * Math.min(1, Math.max(0, end - now) / this.deadlineMs)
  }

  /** Queues `rows` rows of one request; resolves with its results, one per slice, in row order. */
  submit(payload: P, rows: number, options: string | SubmitOptions = {}): Promise<R[]> {
    const o: SubmitOptions = typeof options === 'string' ? { key: options } : options
    if (this.closed) return Promise.reject(new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
    if (!Number.isInteger(rows) || rows < 1) return Promise.reject(new Error(`rows must be a positive integer, got ${rows}`))
    if (o.signal?.aborted) return Promise.reject(new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away before the request was queued'))
    const now = this.clock.now()
    if (this.lastArrival !== undefined) {
      const gap = Math.max(now - this.lastArrival, 0.001)
      this.rate += 0.2 * (rows / gap - this.rate)
    }
    this.lastArrival = now
    this.arrivals++
    const refused = this.refusal(rows, o)
    if (refused) return Promise.reject(refused)
    const priority = o.priority ?? PRIORITY.normal
    const deadline = this.budgetEnd(now, o.deadline)
    return new Promise<R[]>((resolve, reject) => {
      const item: Pending<P, R> = { payload, rows, key: o.key ?? '', priority, seq: this.seq++, arrived: now, deadline, next: 0, parts: [], outstanding: 0, failed: false, resolve, reject, gone: o.gone, timing: o.timing }
      if (o.signal) {
        const signal = o.signal
        const gone = () => {
          // Only rows still waiting can be spared; a part already running finishes.
          if (item.outstanding === 0 && this.queue.remove(item)) {
            this.fail(item, new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away while the request was queued'))
            this.schedule()
          }
        }
        signal.addEventListener('abort', gone, { once: true })
        item.unlisten = () => signal.removeEventListener('abort', gone)
      }
      this.queue.add(item)
      this.schedule()
    })
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
    const idle = waiting === 0 && this.busy < this.options.slots
    if (idle || this.model.observations < 3) return now
    const ahead = waiting + rows
    const best = (n: number) => this.model.estimate(n, 'best')
    const size = this.drainSize(ahead, Infinity, best)
    const rounds = Math.ceil(Math.ceil(ahead / size) / this.options.slots)
    // Until a worker is free: what the busy ones hold is expected to end then.
    const busyWait = this.soonestFree(now) - now
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
    for (const item of this.queue.clear()) this.fail(item, new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
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
    if (this.drained !== undefined && this.queue.size === 0 && this.busy === 0) {
      this.drained()
      this.drained = undefined
    }
  }

  private fail(item: Pending<P, R>, err: unknown): void {
    if (item.failed) return
    item.failed = true
    item.unlisten?.()
    item.reject(err)
  }

  /**
   * Refuses a queued request that can no longer finish in time. Its pace (see refusalPace) is
   * half the deadline: a client that resends at once would join the tail of the very queue it
   * was shed from, so shedding would never shorten it — each shed only adding a body read to the
   * API process, whose CPU the worker shares. The queue turns over in about one deadline; half
   * of one later, it has moved on. (Servers answer paces over 50 ms at once: with deadlines
   * over 100 ms, shedding means real overload, and clients had better go elsewhere.)
   */
  private shed(item: Pending<P, R>, now: number): void {
    this.queue.remove(item)
    this.options.observer?.rejected('deadline')
    this.fail(item, overloaded(`the request waited ${Math.round(now - item.arrived)} ms and can no longer finish before its deadline`, this.deadlineMs / 2))
  }

  /**
   * Execution time of a batch of `rows`, as the shedding decisions see it: compute alone. The trip
   * back to this process is left to the headroom: under a storm of refusals it grows with the
   * storm, and a batcher that counted it would refuse still more (see predictedFinish).
   */
  private cost(rows: number): number {
    return this.model.estimate(Math.min(rows, this.options.maxBatchSize))
  }

  /** When the soonest worker is expected to be free (now if one holds nothing). */
  private soonestFree(now: number, slow = false): number {
    if (this.busy < this.options.slots) return now
    const ends = slow ? this.workerEndsSlow : this.workerEnds
    let min = Infinity
    for (let i = 0; i < this.options.slots; i++) min = Math.min(min, ends[i] ?? now)
    return Math.max(now, min)
  }

  private schedule(afterWait = false): void {
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer)
      this.timer = undefined
    }
    // A wait during which nothing arrived showed the rate estimate was stale: run what is
    // queued. Draining never waits either.
    const noMoreWaiting = (afterWait && this.arrivals === this.waitArrivals) || this.closed
    while (this.busy < this.options.slots * this.depth) {
      const q = this.queue.first()
      if (q === undefined) return
      const now = this.clock.now()
      const head = q[0]!
      const headRows = head.rows - head.next
      const target = this.target(head.deadline - now)
      const queued = this.queue.rowsIn(q)
      const known = this.model.observations >= 3
      // The batch that would run now: the head alone without batching; a full target batch
      // (bigger under a backlog that target-sized batches cannot clear before the head's
      // deadline: latency first, then throughput); or, short of target, what is queued.
      const size = !this.batching ? headRows : queued >= target ? (known ? this.drainSize(queued, head.deadline - now) : target) : queued
      // Shed a head that is past its deadline, or that could not finish in that batch (which
      // starts when a worker is free) while others wait behind it (a head alone is run: the
      // worker would idle otherwise).
      // A batch handed over while the worker is busy starts when its current one ends: count on
      // that one's slow time, not its typical one, so its requests are not made late.
      const start = this.soonestFree(now, true)
      const late = now >= head.deadline || (known && this.queue.size > 1 && start + this.cost(size) > head.deadline)
      if (late) {
        this.shed(head, now)
        continue
      }
      // Every worker holds a batch: the next one goes over just before one is expected to be
      // free (its answer then takes `lead` to come back here), or at once if a full batch waits.
      if (this.busy >= this.options.slots && !(this.batching && queued >= target) && !this.closed) {
        const lead = Math.max(1, this.overhead.typical())
        const freeIn = this.soonestFree(now) - now - lead
        // Less than a timer's resolution away: hand it over now.
        if (freeIn > 0.5) {
          this.timer = this.clock.setTimeout(() => {
            this.timer = undefined
            this.schedule()
          }, freeIn)
          return
        }
      }
      if (!this.batching) {
        this.dispatch(q, headRows, true, now)
        continue
      }
      if (queued >= target) {
        this.dispatch(q, size, false, now)
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
      this.dispatch(q, queued, false, now)
    }
  }

  /**
   * How long to hold `queued` rows hoping to reach `target` (0 = run now). Waiting must fit in
   * the batch window (maxDelayMs from the head's arrival) and in the head's deadline, and must
   * raise throughput: target rows after the wait beat the queued rows now.
   */
  private worthWaiting(now: number, head: Pending<P, R>, queued: number, target: number): number {
    if (this.rate <= 0 || this.model.observations === 0) return 0
    const window = head.arrived + this.maxDelayMs - now
    if (window <= 0) return 0
    // Silence since the last arrival lowers the rate: a burst long past says little about now.
    const silence = now - (this.lastArrival ?? now)
    const rate = silence > 0 ? Math.min(this.rate, 1 / silence) : this.rate
    const fill = (target - queued) / rate
    const slack = head.deadline - now - this.cost(target)
    if (fill > slack || fill > window) return 0
    const nowThroughput = queued / Math.max(this.model.estimate(queued), 1e-6)
    const laterThroughput = target / (fill + Math.max(this.model.estimate(target), 1e-6))
    return laterThroughput > nowThroughput ? Math.min(Math.max(fill, 0.05), window) : 0
  }

  /** Takes up to `rows` rows from the front of `q` (splitting the last request if needed) and runs them. */
  private dispatch(q: Pending<P, R>[], rows: number, single: boolean, now: number): void {
    // `rows` is the size aimed for; requests are taken whole while the batch is below it, and
    // split only where one straddles maxBatchSize (a request is never cut to hit a target).
    const cap = single ? rows : Math.min(rows, this.options.maxBatchSize)
    const hard = single ? rows : this.options.maxBatchSize
    const finish = this.soonestFree(now, true) + this.cost(cap)
    const slices: Slice<P>[] = []
    const owners: Pending<P, R>[] = []
    let taken = 0
    while (q.length > 0 && taken < cap) {
      const item = q[0]!
      // A caller that has gone is not run for (unless part of its request already runs).
      if (item.outstanding === 0 && item.gone?.()) {
        this.queue.remove(item)
        this.fail(item, new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away while the request was queued'))
        continue
      }
      // Deadlines differ (a client's own, other levels): one that this batch would make late
      // is shed now rather than run for nobody — unless it would run alone.
      if (taken > 0 && finish > item.deadline && item.outstanding === 0) {
        this.shed(item, now)
        continue
      }
      const n = Math.min(item.rows - item.next, hard - taken)
      slices.push({ payload: item.payload, start: item.next, rows: n })
      owners.push(item)
      item.outstanding++
      this.queue.took(q, item, n)
      taken += n
      if (single) break
    }
    this.busy++
    // The worker it is expected to go to (the one free soonest) holds it until about then.
    let w = 0
    for (let i = 1; i < this.options.slots; i++) if ((this.workerEnds[i] ?? 0) < (this.workerEnds[w] ?? 0)) w = i
    this.workerEnds[w] = Math.max(now, this.workerEnds[w] ?? 0) + this.model.estimate(taken)
    this.workerEndsSlow[w] = Math.max(now, this.workerEndsSlow[w] ?? 0) + this.model.estimate(taken, 'slow')
    const started = this.clock.now()
    const waited = owners.map((o) => started - o.arrived)
    let compute: number | undefined
    let result: Promise<R[]>
    try {
      result = this.execute(slices, taken, (ms) => (compute = ms))
    } catch (err) {
      result = Promise.reject(err)
    }
    result.then(
      (results) => {
        const total = this.clock.now() - started
        // The runner's own measure when it gives one; the rest was the way there and back.
        this.model.observe(taken, compute ?? total)
        if (compute !== undefined) this.overhead.observe(total - compute)
        this.options.observer?.batch(taken, waited, total, true)
        slices.forEach((s, i) => {
          const item = owners[i]!
          if (item.timing) {
            item.timing.queueMs += waited[i]!
            item.timing.computeMs += compute ?? total
            item.timing.transferMs += compute === undefined ? 0 : total - compute
          }
          item.outstanding--
          item.parts.push({ start: s.start, result: results[i]! })
          if (!item.failed && item.outstanding === 0 && item.next === item.rows) {
            item.unlisten?.()
            item.parts.sort((a, b) => a.start - b.start)
            item.resolve(item.parts.map((p) => p.result))
          }
        })
      },
      (err) => {
        this.options.observer?.batch(taken, waited, this.clock.now() - started, false)
        for (const item of owners) {
          item.outstanding--
          // The rest of a split request must not run for nothing.
          this.queue.remove(item)
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
