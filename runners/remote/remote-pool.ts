import { randomUUID } from 'node:crypto'
import type { Queue, QueueEvents } from 'bullmq'
import { BundleError, errorFromWire, ignore } from '../../errors/index.js'
import { announce, capacity } from './capacity.js'
import { bullmq } from './libs.js'
import type { RedisLink } from './link.js'
import { pack, TRANSPORT_FAILURE, unpack, type JobData, type JobResult } from './payload.js'
import { startedQueue } from './started-queue.js'
import type { RemoteLikePool } from '../pool/pool.js'
import type { TraceCarrier } from '../tracing/index.js'

/** How long a batch waits for a worker while none is live (serve --remote-grace). */
export const DEFAULT_REMOTE_GRACE_MS = 2_000
/** Times a batch is tried when workers lose Redis while moving it (each time on a worker whose Redis answers). */
const ATTEMPTS = 3

export interface RemotePoolOptions {
  link: RedisLink
  /** The runner's queue (see queueName). */
  queue: string
  runner: string
  /** A batch not answered within this fails (E_REMOTE_NO_WORKERS or E_RUNNER_TIMEOUT). */
  timeoutMs: number
  /** Told how many batches the live workers take at once (the batcher's slots). */
  onCapacity?: (slots: number) => void
  /** The model's content digest, checked by the workers (onnx runners). */
  digest?: string
  /**
   * While no worker is live, a batch waits at most this long for one (default 2 000 ms; 0 fails
   * at once), then fails with E_REMOTE_NO_WORKERS and leaves the queue. Infinity: the workers
   * scale to zero — a batch waits for one until its deadline, in the queue an autoscaler watches,
   * and the runner stays ready with no worker live.
   */
  graceMs?: number
}

interface Pending {
  resolve: (v: unknown) => void
  reject: (e: unknown) => void
  timer: NodeJS.Timeout
  /** Set while no worker is live: when the batch stops waiting for one. */
  grace?: NodeJS.Timeout | undefined
  started: boolean
  /** When a worker took it (its 'active' event): the batch's time counts from there, not from the queue. */
  startedAt?: number
  /** Told the batch's time on the worker side (from taken to answered), for the batcher's latency model. */
  timing?: ((ms: number) => void) | undefined
}

/**
 * The API server's side of a remote runner: what a local WorkerPool does with a batch, done by
 * workers on other machines. Each batch the batcher forms becomes one BullMQ job on the
 * runner's queue; its answer arrives through the queue's event stream. A batch waits at most
 * until its deadline, which travels with the job so workers skip batches nobody waits for.
 * While Redis is down, calls fail at once with E_REMOTE_UNAVAILABLE; those waiting fail too.
 * While no worker is live (by heartbeat), a batch waits a short grace for one, then fails with
 * E_REMOTE_NO_WORKERS and is taken off the queue; the runner is not ready meanwhile — unless the
 * workers scale to zero (graceMs Infinity): then it stays ready and a batch waits until its deadline.
 */
export class RemotePool implements RemoteLikePool {
  readonly kind = 'remote' as const
  /** Batches travel as one message: tensors are joined before they are sent. */
  readonly gathers = false
  private queue: Queue | undefined
  private events: QueueEvents | undefined
  private readonly pending = new Map<string, Pending>()
  private poll: NodeJS.Timeout | undefined
  private offLink: (() => void) | undefined
  private unannounce: (() => Promise<void>) | undefined
  private conns: ReturnType<RedisLink['connection']>[] = []
  private live = { workers: 0, slots: 0 }
  /** Batches one worker takes at once, as last seen while any was live (kept while none is). */
  private slotsPerWorker: number | undefined
  private queued = 0

  private readonly graceMs: number
  /** Set while stop() waits for the batches in flight to be answered. */
  private drained: (() => void) | undefined

  constructor(private readonly o: RemotePoolOptions) {
    this.graceMs = o.graceMs ?? DEFAULT_REMOTE_GRACE_MS
  }

  private openQueue(): Queue {
    const q = new (bullmq().Queue)(this.o.queue, {
      connection: this.conns[0]!,
      prefix: this.o.link.prefix,
      streams: { events: { maxLen: 1_000 } },
    })
    q.on('error', () => undefined)
    return q
  }

  async start(): Promise<void> {
    const { link, queue } = this.o
    this.conns = [link.connection(false), link.connection(true)]
    // Events are read as they come; a short stream is enough and bounds Redis memory.
    this.queue = this.openQueue()
    this.events = new (bullmq().QueueEvents)(queue, { connection: this.conns[1]!, prefix: link.prefix })
    this.events.on('error', () => undefined)
    this.events.on('active', ({ jobId }) => {
      const p = this.pending.get(jobId)
      if (p === undefined) return
      p.started = true
      p.startedAt = performance.now()
      clearTimeout(p.grace)
      p.grace = undefined
    })
    // A failed attempt that BullMQ retries puts the job back in the queue ('waiting' from
    // 'active'); only the last attempt's failure comes as 'failed'.
    this.events.on('waiting', ({ jobId, prev }) => {
      const p = prev === 'active' ? this.pending.get(jobId) : undefined
      if (p === undefined) return
      p.started = false
      p.startedAt = undefined
      if (this.live.workers === 0) this.armGrace(jobId)
    })
    this.events.on('completed', ({ jobId, returnvalue }) => this.settle(jobId, returnvalue as unknown))
    this.events.on('failed', ({ jobId, failedReason }) => this.settle(jobId, undefined, failedReason))
    // Requests waiting on a Redis that went away would wait for answers that may never come.
    this.offLink = link.onChange((up) => {
      if (up) return
      for (const id of [...this.pending.keys()])
        this.take(id)?.reject(
          new BundleError('E_REMOTE_UNAVAILABLE', `runner ${this.o.runner}: lost Redis while its batch was out`),
        )
    })
    const refresh = async () => {
      try {
        const [live, apis, counts] = await Promise.all([
          capacity(link, queue),
          capacity(link, queue, 'apis'),
          this.queue!.getJobCounts('wait', 'prioritized'),
        ])
        this.setLive(live)
        this.queued = (counts.wait ?? 0) + (counts.prioritized ?? 0)
        // Each API server sends its share of what the workers take at once, so replicas do not
        // each fill every worker (that would only queue batches in Redis).
        this.o.onCapacity?.(Math.max(1, Math.ceil(live.slots / Math.max(1, apis.workers))))
      } catch {
        // Redis down: readiness says so; keep the last numbers
      }
    }
    // The server starts even while Redis is down (not ready, saying why) and recovers by itself.
    // Answers are read from the event stream from the moment it connects: wait for that before
    // the first batch, but never for long, as Redis may be down.
    const up = await link.connected(3_000).then(
      () => true,
      () => false,
    )
    this.unannounce = announce(link, queue, randomUUID(), 1, 'apis')
    if (up)
      await Promise.all([
        Promise.race([this.events.waitUntilReady(), new Promise((r) => setTimeout(r, 3_000))]).catch(
          ignore('the events connection keeps trying by itself; answers come once it is up'),
        ),
        refresh(),
      ])
    this.poll = setInterval(refresh, 1_000)
    this.poll.unref()
  }

  /** Ready while Redis is reachable and at least one worker is live. */
  ready(): boolean {
    return this.notReadyReason() === undefined
  }

  /** Why not ready (for /readyz), or undefined. */
  notReadyReason(): string | undefined {
    return (
      this.o.link.unavailable() ??
      (this.live.workers === 0 && this.graceMs !== Number.POSITIVE_INFINITY
        ? `no live remote worker for queue ${this.o.queue}`
        : undefined)
    )
  }

  private setLive(live: { workers: number; slots: number }): void {
    this.live = live
    if (live.workers > 0) {
      this.slotsPerWorker = live.slots / live.workers
      for (const p of this.pending.values()) {
        clearTimeout(p.grace)
        p.grace = undefined
      }
      return
    }
    // The last worker is gone: batches still waiting in the queue get the grace, then fail.
    for (const [id, p] of this.pending) if (!p.started && p.grace === undefined) this.armGrace(id)
  }

  /** Starts a waiting batch's grace: if no worker is live at its end, the batch fails and leaves the queue. */
  private armGrace(jobId: string): void {
    const p = this.pending.get(jobId)
    // Workers that scale to zero: the batch waits in the queue until its deadline (the run's timer).
    if (p === undefined || this.graceMs === Number.POSITIVE_INFINITY) return
    clearTimeout(p.grace)
    p.grace = setTimeout(() => void this.graceOver(jobId), this.graceMs)
  }

  private async graceOver(jobId: string): Promise<void> {
    const p = this.pending.get(jobId)
    if (p === undefined || p.started) return
    p.grace = undefined
    // A fresh count: a worker may have come within the last heartbeat refresh.
    try {
      this.setLive(await capacity(this.o.link, this.o.queue))
    } catch {
      return // Redis down: the link's listener answers the waiting batches
    }
    if (this.live.workers > 0 || !this.pending.has(jobId)) return
    // Taken off the queue so a worker that comes later does not run work nobody waits for. A
    // batch a worker holds is locked and stays (remove answers 0): its answer is on its way.
    const removed = await this.queue?.remove(jobId).catch(() => 0)
    if (removed !== 1) return
    void this.o.link.client().del(this.payloadKey(jobId)).catch(ignore('the payload expires by its TTL anyway'))
    this.take(jobId)?.reject(this.noWorkers())
  }

  private noWorkers(): BundleError {
    return new BundleError(
      'E_REMOTE_NO_WORKERS',
      `runner ${this.o.runner}: no live remote worker for its queue (waited ${this.graceMs} ms); start one with ` +
        `bundle worker`,
    )
  }

  private payloadKey(jobId: string): string {
    return `${this.o.link.prefix}:payload:${jobId}`
  }

  /** Removes a waiting batch and its timers; returns its waiter, if it was still waiting. */
  private take(jobId: string): Pending | undefined {
    const p = this.pending.get(jobId)
    if (p === undefined) return undefined
    clearTimeout(p.timer)
    clearTimeout(p.grace)
    this.pending.delete(jobId)
    if (this.pending.size === 0) this.drained?.()
    return p
  }

  /**
   * Live remote workers, batches waiting for one (refreshed every second), the batches one worker
   * takes at once (the last seen while none is live; undefined before any was), and this server's
   * batches not answered yet.
   */
  state(): { workers: number; queued: number; slotsPerWorker: number | undefined; waiting: number } {
    return {
      workers: this.live.workers,
      queued: this.queued,
      slotsPerWorker: this.slotsPerWorker,
      waiting: this.pending.size,
    }
  }

  /** Live remote workers (heartbeats). */
  get size(): number {
    return this.live.workers
  }

  async run(method: string, args: unknown, timing?: (ms: number) => void, trace?: TraceCarrier[]): Promise<unknown> {
    this.o.link.check()
    const current = this.queue
    if (current === undefined) throw new BundleError('E_RUNNER_STOPPED', `runner ${this.o.runner} is not started`)
    const queue = await startedQueue(current, () => this.openQueue())
    if (queue !== current && this.queue === current) this.queue = queue
    // No grace: with no live worker, fail before queueing (after a fresh count, as the
    // heartbeat-refreshed one may be a second old). With live workers this costs nothing.
    if (this.graceMs === 0 && this.live.workers === 0) {
      this.setLive(await capacity(this.o.link, this.o.queue).catch(() => this.live))
      if (this.live.workers === 0) throw this.noWorkers()
    }
    const jobId = randomUUID()
    const deadline = this.o.link.now() + this.o.timeoutMs
    const result = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        const p = this.take(jobId)
        p?.reject(
          p.started
            ? new BundleError('E_RUNNER_TIMEOUT', `runner ${this.o.runner}: no answer within ${this.o.timeoutMs} ms`)
            : new BundleError(
                'E_REMOTE_NO_WORKERS',
                `runner ${this.o.runner}: no remote worker took the batch within ${this.o.timeoutMs} ms ` +
                  `(${this.live.workers} live)`,
              ),
        )
      }, this.o.timeoutMs)
      this.pending.set(jobId, { resolve, reject, timer, started: false, timing })
    })
    // It may be rejected (Redis lost, grace over) while the batch is still being queued, before
    // anyone awaits it: that must not count as an unhandled rejection, which ends the process.
    result.catch(ignore("the batch's caller awaits it and hears the failure"))
    if (this.live.workers === 0) this.armGrace(jobId)
    try {
      const data: JobData = {
        method,
        args: await pack(this.o.link, this.payloadKey(jobId), args, this.o.timeoutMs + 5_000),
        deadline,
        ...(this.o.digest ? { digest: this.o.digest } : {}),
        ...(trace ? { trace } : {}),
      }
      // Retried at once (no backoff) when a worker lost Redis while moving it.
      await queue.add(method, data, { jobId, removeOnComplete: true, removeOnFail: true, attempts: ATTEMPTS })
    } catch (err) {
      this.take(jobId)
      throw new BundleError(
        'E_REMOTE_UNAVAILABLE',
        `runner ${this.o.runner}: the batch could not be queued (Redis unreachable); retry shortly`,
        { cause: err },
      )
    }
    return result
  }

  /** A job finished: answer its waiter once (a late or repeated answer finds nobody). */
  private settle(jobId: string, returned: unknown, failed?: string): void {
    const p = this.take(jobId)
    if (p === undefined) return
    // The batch's payload key, if it had one, is no longer needed by any worker.
    void this.o.link.client().del(this.payloadKey(jobId)).catch(ignore('the payload expires by its TTL anyway'))
    if (failed?.startsWith(`${TRANSPORT_FAILURE}:`)) {
      p.reject(
        new BundleError(
          'E_REMOTE_UNAVAILABLE',
          `runner ${this.o.runner}: the batch failed ${ATTEMPTS} times on workers that lost Redis while moving it; ` +
            `retry shortly`,
        ),
      )
      return
    }
    if (failed !== undefined) {
      p.reject(new BundleError('E_RUNNER_CRASHED', `runner ${this.o.runner}: the remote batch failed: ${failed}`))
      return
    }
    let r: JobResult
    try {
      r = (typeof returned === 'string' ? JSON.parse(returned) : returned) as JobResult
    } catch {
      p.reject(new BundleError('E_INTERNAL', `runner ${this.o.runner}: unreadable answer from a remote worker`))
      return
    }
    if ('ok' in r) {
      // The time in Redis waiting for a worker (one starting from zero: seconds) is not the batch's:
      // counted in, the latency model would take every batch for that slow and shed what it could run.
      if (p.startedAt !== undefined) p.timing?.(performance.now() - p.startedAt)
      unpack(this.o.link, r.ok, true).then(p.resolve, p.reject)
      return
    }
    p.reject(errorFromWire(r.error, (message) => new BundleError('E_INTERNAL', message)))
  }

  async stop(graceMs = 10_000): Promise<void> {
    if (this.pending.size > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        new Promise<void>((resolve) => (this.drained = resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs))),
      ])
      clearTimeout(timer)
      this.drained = undefined
    }
    clearInterval(this.poll)
    this.offLink?.()
    await this.unannounce?.()
    // BullMQ's close waits on its connections; with Redis gone that could be forever.
    const closing = Promise.all([
      this.events?.close().catch(ignore('closing: a connection that cannot close goes with the pool')),
      this.queue?.close().catch(ignore('closing: a connection that cannot close goes with the pool')),
    ])
    await Promise.race([closing, new Promise((r) => setTimeout(r, 1_000).unref())])
    for (const c of this.conns) this.o.link.release(c)
    this.conns = []
    this.queue = undefined
    this.events = undefined
  }
}

/**
 * A runner's queue: scoped by the bundle (name and digest) or service, so API servers and
 * workers of different versions never exchange batches.
 */
export const queueName = (scope: string, runner: string): string =>
  `${scope}.${runner}`.replace(/[^A-Za-z0-9._-]/g, '-')
