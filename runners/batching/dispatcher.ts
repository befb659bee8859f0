import { BundleError } from '../../errors/index.js'
import { Admission } from './admission.js'
import { BatchRunner, type Execute } from './batch.js'
import { BatchWindow } from './batch-window.js'
import { realClock, type Clock } from './clock.js'
import { LatencyModel } from './latency-model.js'
import { settingsOf, type DispatcherOptions, type Settings } from './options.js'
import { Overhead } from './overhead.js'
import { PRIORITY } from './priority.js'
import { WaitQueue } from './queue.js'
import { fail, type Pending, type SubmitOptions } from './request.js'
import { Shedding } from './shedding.js'
import { BatchSizer } from './sizing.js'
import { Workers } from './workers.js'
import { OfferedRate, sustainedRate } from './load.js'

// The dispatcher's public surface, wherever its parts live: runners and tests import it from here.
export type { Execute, Slice } from './batch.js'
export {
  DEFAULT_DEADLINE_MS,
  DEFAULT_MAX_DELAY_MS,
  type BatchStages,
  type DispatcherOptions,
  type DispatchObserver,
} from './options.js'
export { overloaded, refusalPace, type RejectReason } from './refusal.js'
export type { StageTimes, SubmitOptions } from './request.js'

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
 *
 * This class holds the state and decides when a batch runs (schedule); its parts, each in its
 * own file: the queue (queue.ts), admission on arrival (admission.ts), batch sizes (sizing.ts),
 * the adaptive wait (batch-window.ts), shedding at dispatch (shedding.ts), the workers' slots
 * (workers.ts), and forming and running one batch (batch.ts).
 */
export class Dispatcher<P, R> {
  private readonly queue = new WaitQueue<Pending<P, R>>()
  private timer: unknown
  private seq = 0
  private closed = false
  /** Set by drain(): resolves once nothing is queued or running. */
  private drained: (() => void) | undefined
  private draining: Promise<void> | undefined
  readonly model: LatencyModel
  readonly deadlineMs: number
  private readonly clock: Clock
  private readonly settings: Settings
  private readonly overhead = new Overhead()
  private readonly workers: Workers
  private readonly sizer: BatchSizer
  private readonly admission: Admission
  private readonly window: BatchWindow
  private readonly shedding: Shedding<P, R>
  private readonly batches: BatchRunner<P, R>
  /** Rows offered (accepted or refused) over the last 10 s: the demand on this replica. */
  private readonly offered = new OfferedRate()

  constructor(options: DispatcherOptions, execute: Execute<P, R>) {
    const settings = (this.settings = settingsOf(options))
    this.deadlineMs = settings.deadlineMs
    const clock = (this.clock = options.clock ?? realClock)
    const model = (this.model = options.model ?? new LatencyModel({ now: () => clock.now() }))
    const { queue, overhead } = this
    const workers = (this.workers = new Workers(options.slots, settings.depth))
    const sizer = (this.sizer = new BatchSizer(settings, model, overhead, workers))
    this.admission = new Admission(settings, queue, workers, sizer, model, clock)
    this.window = new BatchWindow(settings.maxDelayMs, model, sizer)
    const shedding = (this.shedding = new Shedding(settings, queue, sizer))
    const settled = () => {
      this.schedule()
      this.checkDrained()
    }
    this.batches = new BatchRunner({
      settings,
      queue,
      workers,
      sizer,
      model,
      overhead,
      shedding,
      clock,
      execute,
      settled,
    })
  }

  /** Batches that may run at once changes with the number of workers (autoscaling). */
  setSlots(slots: number): void {
    if (!(slots >= 1)) throw new Error('slots must be positive')
    this.workers.slots = slots
    this.schedule()
  }

  /**
   * How many replicas' worth of work is offered here: rows offered per second ÷ rows per second
   * the workers sustain within the deadline (undefined until a batch was timed). 1 means this
   * replica is exactly busy; summed over replicas it is how many the load needs. `slots`: batches
   * at once of the capacity to measure against (default this dispatcher's; a remote runner passes
   * one worker's, so the ratio is in workers).
   */
  load(slots: number = this.workers.slots): {
    offeredPerSecond: number
    sustainedPerSecond: number | undefined
    ratio: number | undefined
  } {
    const offeredPerSecond = this.offered.perSecond(this.clock.now())
    const sustainedPerSecond = sustainedRate(this.model, {
      slots,
      maxBatchSize: this.settings.batching ? this.settings.maxBatchSize : 1,
      deadlineMs: this.deadlineMs,
      overheadMs: this.overhead.best(),
    })
    const ratio = sustainedPerSecond === undefined ? undefined : offeredPerSecond / sustainedPerSecond
    return { offeredPerSecond, sustainedPerSecond, ratio }
  }

  stats(): DispatcherStats {
    return {
      queuedRows: this.queue.rows,
      queuedRequests: this.queue.size,
      inFlight: this.workers.busy,
      targetBatchSize: this.sizer.target(),
      observations: this.model.observations,
      overheadMs: this.overhead.best(),
    }
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
  refusal(
    rows = 1,
    options: Pick<SubmitOptions, 'deadline' | 'priority'> = {},
    record = true,
  ): BundleError | undefined {
    if (this.closed) return undefined // the call itself says it is stopping
    const refused = this.admission.refusal(rows, options, record)
    // Refused before its body was read, a request never reaches submit(): it is demand all the same.
    if (refused && record) this.offered.add(this.clock.now(), rows)
    return refused
  }

  /** Queues `rows` rows of one request; resolves with its results, one per slice, in row order. */
  submit(payload: P, rows: number, options: string | SubmitOptions = {}): Promise<R[]> {
    const o: SubmitOptions = typeof options === 'string' ? { key: options } : options
    if (this.closed) return Promise.reject(new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
    if (!Number.isInteger(rows) || rows < 1)
      return Promise.reject(new Error(`rows must be a positive integer, got ${rows}`))
    if (o.signal?.aborted)
      return Promise.reject(
        new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away before the request was queued'),
      )
    const now = this.clock.now()
    this.offered.add(now, rows)
    this.window.arrived(now, rows, this.queue.first() !== undefined)
    const refused = this.admission.refusal(rows, o, true)
    if (refused) return Promise.reject(refused)
    const priority = o.priority ?? PRIORITY.normal
    const deadline = this.admission.budgetEnd(now, o.deadline)
    return new Promise<R[]>((resolve, reject) => {
      const item: Pending<P, R> = {
        payload,
        rows,
        key: o.key ?? '',
        priority,
        seq: this.seq++,
        arrived: now,
        deadline,
        next: 0,
        parts: [],
        outstanding: 0,
        failed: false,
        resolve,
        reject,
        gone: o.gone,
        timing: o.timing,
        trace: o.trace,
      }
      if (o.signal) {
        const signal = o.signal
        const gone = () => {
          // Only rows still waiting can be spared; a part already running finishes.
          if (item.outstanding === 0 && this.queue.remove(item)) {
            this.settings.observer?.cancelled?.(item.rows - item.next)
            fail(item, new BundleError('E_HTTP_CLIENT_CLOSED', 'the caller went away while the request was queued'))
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

  /** Stops taking requests; queued ones are rejected, running batches finish. */
  close(): void {
    this.closed = true
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer)
    for (const item of this.queue.clear()) fail(item, new BundleError('E_RUNNER_STOPPED', 'the runner is stopping'))
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
    if (this.drained !== undefined && this.queue.size === 0 && this.workers.busy === 0) {
      this.drained()
      this.drained = undefined
    }
  }

  /** Hands batches to workers while they may take one, or sets a timer for when to look again. */
  private schedule(afterWait = false): void {
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer)
      this.timer = undefined
    }
    const { batching } = this.settings
    // A wait during which nothing arrived showed the rate estimate was stale: run what is
    // queued. Draining never waits either.
    const noMoreWaiting = (afterWait && this.window.waitedInVain()) || this.closed
    while (!this.workers.full()) {
      const q = this.queue.first()
      if (q === undefined) return
      const now = this.clock.now()
      const head = q[0]!
      const headRows = head.rows - head.next
      const target = this.sizer.target(head.deadline - now)
      const queued = this.queue.rowsIn(q)
      const known = this.model.observations >= 3
      // The batch that would run now: the head alone without batching; a full target batch
      // (bigger under a backlog that target-sized batches cannot clear before the head's
      // deadline: latency first, then throughput); or, short of target, what is queued.
      const size = !batching
        ? headRows
        : queued >= target
          ? known
            ? this.sizer.drainSize(queued, head.deadline - now)
            : target
          : queued
      // A batch handed over while the worker is busy starts when its current one ends: count on
      // that one's slow time, not its typical one, so its requests are not made late.
      const start = this.workers.soonestFree(now, true)
      if (this.shedding.lateHead(now, head, start, size, known)) {
        this.shedding.shed(head, now)
        continue
      }
      // Every worker holds a batch: the next one goes over just before one is expected to be
      // free (its answer then takes `lead` to come back here), or at once if a full batch waits.
      if (!this.workers.anyFree() && !(batching && queued >= target) && !this.closed) {
        const lead = Math.max(1, this.overhead.typical())
        const freeIn = this.workers.soonestFree(now) - now - lead
        // Less than a timer's resolution away: hand it over now.
        if (freeIn > 0.5) {
          this.timer = this.clock.setTimeout(() => {
            this.timer = undefined
            this.schedule()
          }, freeIn)
          return
        }
      }
      if (!batching) {
        this.batches.run(q, headRows, true, now)
        continue
      }
      if (queued >= target) {
        this.batches.run(q, size, false, now)
        continue
      }
      const wait = noMoreWaiting ? 0 : this.window.worthWaiting(now, head, queued, target)
      if (wait > 0) {
        this.window.waiting()
        this.timer = this.clock.setTimeout(() => {
          this.timer = undefined
          this.schedule(true)
        }, wait)
        return
      }
      this.batches.run(q, queued, false, now)
    }
  }
}
