import { randomUUID } from 'node:crypto'
import type { Job, Queue, Worker } from 'bullmq'
import type { Logger } from 'pino'
import { BundleError, isBundleError, ignore } from '../../../errors/index.js'
import { SpanKind } from '@opentelemetry/api'
import {
  bullmq,
  isTransportError,
  pack,
  spanAround,
  RUN_RETRY_MS,
  startedQueue,
  unpack,
  type Packed,
  type RedisLink,
  type TraceCarrier,
} from '../../../runners/index.js'
import { wholeBody } from '../../io/types.js'
import type { ApiDefinition } from '../../service/definition.js'

// Durable async tasks (@task): each task API has a BullMQ queue in Redis, so a task is seen by
// every replica and outlives the server that took it; every replica also runs some of them.
// A task whose server dies mid-run goes back to the queue once its lock lapses (10 s) and runs
// again elsewhere. Finished tasks are kept a day, failed ones a week.

const KEEP_DONE_S = 24 * 3600
const KEEP_FAILED_S = 7 * 24 * 3600
const LOCK_MS = 10_000

type Status = 'pending' | 'running' | 'success' | 'failure' | 'cancelled'

interface TaskData {
  input: Packed
  /** The submitter's trace context (W3C traceparent), when it sent one. */
  trace?: TraceCarrier
}

interface TaskResult {
  body: string
  contentType: string
  headers?: Record<string, string>
}

export interface TaskOptions {
  link: RedisLink
  /** Names the queues: the bundle or service. */
  scope: string
  apis: readonly ApiDefinition[]
  log: Logger
}

const STATES: Record<string, Status> = {
  waiting: 'pending',
  wait: 'pending',
  delayed: 'pending',
  prioritized: 'pending',
  'waiting-children': 'pending',
  active: 'running',
  completed: 'success',
  failed: 'failure',
}

export class TaskService {
  private readonly queues = new Map<string, Queue>()
  /** Each API's queue connection, kept when a queue is opened again (see queue()). */
  private readonly queueConns = new Map<string, ReturnType<RedisLink['connection']>>()
  private readonly workers: Worker[] = []
  /** The tasks this replica runs now: how to stop each, and the key a cancel sets. */
  private readonly running = new Map<string, { ac: AbortController; cancelKey: string }>()
  /** Called when the last running task ends (stop() waits for it). */
  private onIdle: (() => void) | undefined
  private subscriber: ReturnType<RedisLink['connection']> | undefined
  private started = false
  private stopping = false

  constructor(private readonly o: TaskOptions) {}

  /** The task APIs this service runs: the routes mount one set per API. */
  get apis(): readonly ApiDefinition[] {
    return this.o.apis
  }

  private queueName(a: ApiDefinition): string {
    return `${this.o.scope}.task.${a.name}`.replace(/[^A-Za-z0-9._-]/g, '-')
  }

  private cancelKey(a: ApiDefinition, id: string): string {
    return `${this.o.link.prefix}:task-cancelled:${this.queueName(a)}:${id}`
  }

  private get channel(): string {
    return `${this.o.link.prefix}:task-cancel`
  }

  private connectionOf(a: ApiDefinition): ReturnType<RedisLink['connection']> {
    let conn = this.queueConns.get(a.name)
    if (conn === undefined) this.queueConns.set(a.name, (conn = this.o.link.connection(false)))
    return conn
  }

  private openQueue(a: ApiDefinition): Queue {
    // Nothing reads a task queue's event stream: keep it short (finished jobs hold results).
    const q = new (bullmq().Queue)(this.queueName(a), {
      connection: this.connectionOf(a),
      prefix: this.o.link.prefix,
      streams: { events: { maxLen: 100 } },
    })
    q.on('error', () => undefined)
    return q
  }

  /** The API's queue, started (see startedQueue); call after link.check(). */
  private async queue(a: ApiDefinition): Promise<Queue> {
    const q = this.queues.get(a.name)
    if (q === undefined || !this.started) throw new BundleError('E_HTTP_NOT_READY', 'the service is still starting')
    const started = await startedQueue(q, () => this.openQueue(a))
    if (started !== q) this.queues.set(a.name, started)
    return started
  }

  /** Why tasks cannot be submitted or read now (their Redis is unreachable), for /readyz; undefined when they can. */
  notReadyReason(): string | undefined {
    return this.o.link.unavailable()
  }

  /** Opens the queues and starts this server's share of the work. */
  async start(instance: Record<string, unknown>): Promise<void> {
    const { link } = this.o
    // Not for long: the server starts while Redis is down, and tasks answer 503 until it is back.
    await link.connected(3_000).catch(ignore('Redis is down: tasks answer 503 until it is back'))
    for (const a of this.o.apis) {
      this.queues.set(a.name, this.openQueue(a))
      const w = new (bullmq().Worker)(this.queueName(a), (job) => this.process(a, instance, job), {
        connection: link.connection(true),
        prefix: link.prefix,
        concurrency: a.task!.concurrency,
        lockDuration: LOCK_MS,
        stalledInterval: LOCK_MS / 2,
        maxStalledCount: 2,
        runRetryDelay: RUN_RETRY_MS,
      })
      w.on('error', () => undefined)
      this.workers.push(w)
    }
    // A cancel reaches the replica running the task, wherever it was asked.
    this.subscriber = link.connection(true)
    this.subscriber.on('message', (_ch: string, id: string) =>
      this.running.get(id)?.ac.abort(new BundleError('E_TASK_CANCELLED', 'the task was cancelled')),
    )
    // A cancel published while the subscription was down is missed, but its key stays: each
    // time the connection is back, subscribe (confirmed), then read the running tasks' keys.
    this.subscriber.on('ready', () => void this.resubscribed())
    // Not awaited: with Redis down it would wait for its return; ioredis subscribes again on reconnect.
    this.subscriber.subscribe(this.channel).catch(ignore('Redis is down: ioredis subscribes again once it is back'))
    this.started = true
  }

  private async process(a: ApiDefinition, instance: Record<string, unknown>, job: Job): Promise<TaskResult> {
    // Each run of a task is a span: in its submitter's trace when it sent a traceparent, else a trace of its own.
    const data = job.data as TaskData
    const span = spanAround(
      () => ({
        name: `task ${a.name}`,
        attributes: {
          'bundle.task.id': job.id!,
          'bundle.task.api': a.name,
          'bundle.task.attempt': job.attemptsMade + 1,
        },
      }),
      { parent: data.trace ?? {}, kind: SpanKind.CONSUMER },
    )
    return span ? span.run(() => this.run(a, instance, job)) : this.run(a, instance, job)
  }

  private async run(a: ApiDefinition, instance: Record<string, unknown>, job: Job): Promise<TaskResult> {
    const id = job.id!
    const data = job.data as TaskData
    // Registered before anything else, so a cancel published from now on reaches it (and one sent
    // while this server's subscription was down, when it is back: resubscribed()).
    const ac = new AbortController()
    this.running.set(id, { ac, cancelKey: this.cancelKey(a, id) })
    // A failure BullMQ does not retry.
    const { UnrecoverableError } = bullmq()
    try {
      if ((await this.o.link.client().exists(this.cancelKey(a, id))) === 1) throw new UnrecoverableError('cancelled')
      const input = await unpack(this.o.link, data.input, false)
      const ctx = { requestId: id, signal: ac.signal, headers: { get: () => null } }
      const aborted = new Promise<never>((_, reject) =>
        ac.signal.addEventListener('abort', () => reject(new UnrecoverableError('cancelled')), { once: true }),
      )
      if (ac.signal.aborted) throw new UnrecoverableError('cancelled')
      const output = await Promise.race([
        (instance[a.name] as (i: unknown, c: unknown) => unknown).call(instance, input, ctx),
        aborted,
      ])
      const enc = await a.output.encode(output, undefined)
      const whole = wholeBody(enc, `the output of task ${a.name}`)
      const body = typeof whole === 'string' ? Buffer.from(whole) : Buffer.from(whole)
      // The input is no longer needed once the task succeeded (a failed one keeps it for retry).
      if ('ref' in data.input)
        void this.o.link.client().del(data.input.ref).catch(ignore('the stored input expires by its TTL anyway'))
      return {
        body: body.toString('base64'),
        contentType: enc.contentType,
        ...(enc.headers ? { headers: enc.headers } : {}),
      }
    } catch (err) {
      if (err instanceof UnrecoverableError) throw err
      if (this.stopping) throw err // shutting down: the lock lapses and the task runs elsewhere
      // Redis itself failing is not the task's fault: a plain error is retried (3 attempts).
      if (isTransportError(err) || (!isBundleError(err) && this.o.link.unavailable() !== undefined))
        throw new Error('Redis was unreachable while the task ran')
      // What a client may read in /status: our coded messages; anything else stays in the log.
      this.o.log.error({ err, task: id, api: a.name }, 'task failed')
      throw new UnrecoverableError(
        isBundleError(err) && err.status < 500
          ? `${err.code}: ${err.message}`
          : 'the task failed; the server log has the details',
      )
    } finally {
      this.running.delete(id)
      if (this.running.size === 0) this.onIdle?.()
    }
  }

  async submit(a: ApiDefinition, input: unknown, trace?: TraceCarrier): Promise<string> {
    this.o.link.check()
    const id = randomUUID()
    const data: TaskData = {
      input: await pack(this.o.link, `${this.o.link.prefix}:task-input:${id}`, input, KEEP_FAILED_S * 1000),
      ...(trace ? { trace } : {}),
    }
    await (await this.queue(a)).add(a.name, data, {
      jobId: id,
      attempts: 3,
      backoff: { type: 'exponential', delay: 1_000 },
      removeOnComplete: { age: KEEP_DONE_S },
      removeOnFail: { age: KEEP_FAILED_S },
    })
    return id
  }

  private async job(a: ApiDefinition, id: string): Promise<{ job: Job; status: Status }> {
    this.o.link.check()
    const job = await (await this.queue(a)).getJob(id)
    if (job === undefined) throw new BundleError('E_TASK_NOT_FOUND', `no task ${id} for ${a.route}`)
    const state = await job.getState()
    const status = STATES[state]
    if (status === undefined) throw new BundleError('E_TASK_NOT_FOUND', `no task ${id} for ${a.route}`)
    const cancelled = status !== 'success' && (await this.o.link.client().exists(this.cancelKey(a, id))) === 1
    return { job, status: cancelled ? 'cancelled' : status }
  }

  async status(a: ApiDefinition, id: string): Promise<Record<string, unknown>> {
    const { job, status } = await this.job(a, id)
    const iso = (t: number | undefined) => (t ? new Date(t).toISOString() : undefined)
    return {
      taskId: id,
      status,
      createdAt: iso(job.timestamp),
      ...(job.processedOn ? { startedAt: iso(job.processedOn) } : {}),
      ...(job.finishedOn && status !== 'running' && status !== 'pending' ? { finishedAt: iso(job.finishedOn) } : {}),
      ...(status === 'failure' ? { error: job.failedReason } : {}),
    }
  }

  async result(a: ApiDefinition, id: string): Promise<TaskResult> {
    const { job, status } = await this.job(a, id)
    if (status === 'success') return job.returnvalue as TaskResult
    if (status === 'failure') throw new BundleError('E_TASK_FAILED', `task ${id} failed: ${job.failedReason}`)
    if (status === 'cancelled') throw new BundleError('E_TASK_CANCELLED', `task ${id} was cancelled`)
    throw new BundleError('E_TASK_NOT_FINISHED', `task ${id} is ${status}`)
  }

  async cancel(a: ApiDefinition, id: string): Promise<void> {
    const { status } = await this.job(a, id)
    if (status === 'success' || status === 'failure')
      throw new BundleError('E_TASK_CONFLICT', `task ${id} has already finished (${status})`)
    await this.o.link.client().set(this.cancelKey(a, id), '1', 'EX', KEEP_FAILED_S)
    await this.o.link.client().publish(this.channel, id)
  }

  async retry(a: ApiDefinition, id: string): Promise<void> {
    const { job, status } = await this.job(a, id)
    if (status === 'cancelled' && (await job.getState()) !== 'failed')
      throw new BundleError(
        'E_TASK_CONFLICT',
        `task ${id} is still being cancelled; retry once its status says so for good`,
      )
    if (status !== 'failure' && status !== 'cancelled')
      throw new BundleError(
        'E_TASK_CONFLICT',
        `only a failed or cancelled task can be retried; task ${id} is ${status}`,
      )
    await this.o.link.client().del(this.cancelKey(a, id))
    await job.retry('failed')
  }

  /** The subscription is back: cancels sent while it was down are read from their keys. */
  private async resubscribed(): Promise<void> {
    try {
      await this.subscriber?.subscribe(this.channel)
      for (const { ac, cancelKey } of this.running.values())
        if ((await this.o.link.client().exists(cancelKey)) === 1)
          ac.abort(new BundleError('E_TASK_CANCELLED', 'the task was cancelled'))
      this.o.log.debug({ running: this.running.size }, 'task cancels re-read after reconnecting')
    } catch {
      // Redis went away again: its next 'ready' comes here once more.
    }
  }

  /**
   * Stops taking tasks. Those running get a few seconds to finish; the rest are left to their
   * locks, which lapse, and run again on another replica (or this one after a restart).
   */
  async stop(): Promise<void> {
    this.started = false
    this.stopping = true
    for (const w of this.workers)
      void w.pause(true).catch(ignore('stopping: a worker that cannot pause is closed next'))
    if (this.running.size > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        new Promise<void>((r) => (this.onIdle = r)),
        new Promise<void>((r) => (timer = setTimeout(r, 5_000))),
      ])
      clearTimeout(timer)
    }
    const closing = Promise.all([
      ...this.workers.map((w) =>
        w.close(true).catch(ignore('stopping: a connection that cannot close goes with the process')),
      ),
      ...[...this.queues.values()].map((q) =>
        q.close().catch(ignore('stopping: a connection that cannot close goes with the process')),
      ),
    ])
    await Promise.race([closing, new Promise((r) => setTimeout(r, 1_000).unref())])
    this.subscriber?.disconnect()
    this.workers.length = 0
    this.queues.clear()
  }
}
