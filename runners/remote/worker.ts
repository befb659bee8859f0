import { hostname } from 'node:os'
import { bullmq } from './libs.js'
import { errorToWire, ignore } from '../../errors/index.js'
import { announce } from './capacity.js'
import type { RedisLink } from './link.js'
import { executeSpans, type TraceCarrier } from '../tracing/index.js'
import { isTransportError, pack, TRANSPORT_FAILURE, unpack, type JobData, type JobResult } from './payload.js'

/** A started runner as a remote worker uses it: runs one formed batch on its own worker processes. */
export interface Executor {
  readonly name: string
  /**
   * `trace`: the batch's traced requests, as this worker's spans carry them on to its own workers.
   * `deadline`: the batch's deadline on this process's performance.now() clock.
   */
  execute(method: string, args: unknown, trace?: TraceCarrier[], deadline?: number): Promise<unknown>
  /** The content digest of the model it runs (onnx runners), checked against the batch's. */
  digest?(): string | undefined
}

export interface RemoteWorkerOptions {
  link: RedisLink
  queue: string
  runner: Executor
  /** Batches taken at once (default 1). */
  concurrency?: number
  /**
   * A worker that dies mid-batch loses its lock after this long, and the batch goes to another
   * worker (BullMQ's stalled-job check, run every half of it). Default 4 000 ms.
   */
  lockMs?: number
}

/**
 * After a failed fetch (Redis gone) BullMQ waits this long before it fetches again; its default,
 * 15 s, would leave batches and tasks waiting that long after Redis is back.
 */
export const RUN_RETRY_MS = 1_000

/**
 * Resolves once Redis answers on the link's command connection, the one pack and unpack use
 * (it has no offline queue: a command sent before it is connected fails at once). Waits as long
 * as it takes, unless `stop` says to give up. Between tries it waits for the link to change (down,
 * then up: link.onChange); a ping refused on a link that stays up is tried again after a second.
 */
async function usable(link: RedisLink, stop: () => boolean = () => false): Promise<boolean> {
  while (!stop()) {
    try {
      await link.connected(5_000)
      await link.client().ping()
      return true
    } catch {
      await changeOrSecond(link)
    }
  }
  return false
}

/** The link's next change (down or up), or a second, whichever comes first. */
function changeOrSecond(link: RedisLink): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      off()
      clearTimeout(timer)
      resolve()
    }
    const off = link.onChange(done)
    const timer = setTimeout(done, RETRY_MS)
  })
}

const RETRY_MS = 1_000

// Catalog codes (and their details) travel; anything else arrives as a plain failure.
const answer = (err: unknown): JobResult => ({ error: errorToWire(err) })

/** Why a batch is not run here: its deadline has passed (stale), or it was formed for another model. */
function refused(o: RemoteWorkerOptions, d: JobData): JobResult | undefined {
  if (o.link.now() > d.deadline)
    return {
      error: {
        code: 'E_RUNNER_TIMEOUT',
        message: `runner ${o.runner.name}: the batch waited past its deadline and was not run`,
      },
      stale: true,
    }
  const mine = o.runner.digest?.()
  if (d.digest && mine && d.digest !== mine)
    return {
      error: {
        code: 'E_REMOTE_MODEL_MISMATCH',
        message:
          `runner ${o.runner.name}: the API server serves model ${d.digest.slice(0, 19)}…, this worker ` +
          `runs ${mine.slice(0, 19)}…; run workers of the same bundle`,
      },
    }
  return undefined
}

/**
 * One batch from the queue: its inputs read from Redis, run on this worker's own processes, its
 * outputs stored for the API server. `failed` decides what a failure to move bytes becomes.
 */
async function runBatch(
  o: RemoteWorkerOptions,
  job: { id?: string | undefined; data: unknown },
  host: string,
  failed: (err: unknown) => JobResult,
): Promise<JobResult> {
  const d = job.data as JobData
  const refusal = refused(o, d)
  if (refusal) return refusal
  let args: unknown
  try {
    args = await unpack(o.link, d.args, false)
  } catch (err) {
    return failed(err)
  }
  let out: unknown
  const traced = executeSpans(d.trace, `remote ${d.method}`, {
    'bundle.runner': o.runner.name,
    'bundle.remote.host': host,
  })
  try {
    // The deadline travels on Redis's clock; the runner waits (for a model to load) on its own.
    const deadline = performance.now() + (d.deadline - o.link.now())
    out = await o.runner.execute(d.method, args, traced.carriers, deadline)
    traced.end()
  } catch (err) {
    traced.end(err)
    // The model's or the user's error: answered as it is, never retried.
    return answer(err)
  }
  try {
    const ttl = Math.max(1_000, d.deadline - o.link.now() + 5_000)
    return { ok: await pack(o.link, `${o.link.prefix}:result:${job.id}`, out, ttl) }
  } catch (err) {
    return failed(err)
  }
}

/**
 * Serves a runner's queue: takes the batches API servers formed, runs them on the runner's own
 * worker processes, answers through the queue. A batch whose deadline has passed is answered
 * as stale without running: the requests behind it have already given up.
 *
 * No batch is taken before every connection a batch uses is up (the worker's own and the
 * command connection that reads inputs and stores results), and only then does the worker
 * announce itself. A batch whose inputs or results Redis failed to move goes back to the queue
 * for another worker (the job is retried; the API server ignores the failed attempt), and this
 * worker takes nothing until its Redis answers again.
 */
export async function serveQueue(o: RemoteWorkerOptions): Promise<{ close(): Promise<void> }> {
  const concurrency = o.concurrency ?? 1
  const lockMs = o.lockMs ?? 4_000
  let closing = false
  await usable(o.link)
  // Deadlines are on Redis's clock: start measuring the offset to it now, not at the first batch.
  o.link.now()
  let recovering = false
  const recover = (): void => {
    if (recovering || closing) return
    recovering = true
    void (async () => {
      try {
        await worker.pause(true)
        if ((await usable(o.link, () => closing)) && !closing) await worker.resume()
      } finally {
        recovering = false
      }
    })().catch(ignore('the next batch that fails to move calls recover() again'))
  }
  /** Moving the batch failed: a transport failure is thrown, so BullMQ puts the job back for another worker. */
  const failed = (err: unknown): JobResult => {
    if (!isTransportError(err)) return answer(err)
    recover()
    throw new Error(`${TRANSPORT_FAILURE}: runner ${o.runner.name}: a worker lost Redis while moving the batch`)
  }
  const host = hostname()
  const worker = new (bullmq().Worker)(o.queue, (job) => runBatch(o, job, host, failed), {
    connection: o.link.connection(true),
    prefix: o.link.prefix,
    concurrency,
    lockDuration: lockMs,
    stalledInterval: Math.max(500, lockMs / 2),
    maxStalledCount: 1,
    autorun: false,
    runRetryDelay: RUN_RETRY_MS,
  })
  worker.on('error', () => undefined)
  // Both of the worker's own connections (commands and the blocking wait for jobs).
  await worker.waitUntilReady()
  void worker.run().catch(ignore('the worker reports its failures through its error event'))
  const stopAnnouncing = announce(o.link, o.queue, `${hostname()}:${process.pid}:${o.runner.name}`, concurrency)
  return {
    async close() {
      closing = true
      await stopAnnouncing()
      // Finishes the batches it holds and takes no new ones. With Redis gone it cannot hand
      // answers back, so it waits no longer than a lock lasts (others run those batches anyway).
      const finished = worker
        .close()
        .catch(ignore('without Redis it cannot close cleanly: its locks lapse and others run its batches'))
      const cap = new Promise<void>((resolve) => {
        const giveUp = () => setTimeout(resolve, lockMs + 1_000).unref()
        if (o.link.unavailable() !== undefined) return void giveUp()
        const off = o.link.onChange((up) => !up && giveUp())
        void finished.then(off)
      })
      await Promise.race([finished, cap])
    },
  }
}
