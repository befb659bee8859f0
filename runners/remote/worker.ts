import { hostname } from 'node:os'
import { Worker } from 'bullmq'
import { announce } from './capacity.js'
import type { RedisLink } from './link.js'
import { pack, unpack, type JobData, type JobResult } from './payload.js'

/** A started runner as a remote worker uses it: runs one formed batch on its own worker processes. */
export interface Executor {
  readonly name: string
  execute(method: string, args: unknown): Promise<unknown>
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
 * Serves a runner's queue: takes the batches API servers formed, runs them on the runner's own
 * worker processes, answers through the queue. A batch whose deadline has passed is answered
 * as stale without running: the requests behind it have already given up.
 */
export async function serveQueue(o: RemoteWorkerOptions): Promise<{ close(): Promise<void> }> {
  const concurrency = o.concurrency ?? 1
  const lockMs = o.lockMs ?? 4_000
  const worker = new Worker(
    o.queue,
    async (job): Promise<JobResult> => {
      const d = job.data as JobData
      if (o.link.now() > d.deadline) return { error: { code: 'E_RUNNER_TIMEOUT', message: `runner ${o.runner.name}: the batch waited past its deadline and was not run` }, stale: true }
      const mine = o.runner.digest?.()
      if (d.digest && mine && d.digest !== mine) {
        return { error: { code: 'E_REMOTE_MODEL_MISMATCH', message: `runner ${o.runner.name}: the API server serves model ${d.digest.slice(0, 19)}…, this worker runs ${mine.slice(0, 19)}…; run workers of the same bundle` } }
      }
      try {
        const out = await o.runner.execute(d.method, await unpack(o.link, d.args, false))
        return { ok: await pack(o.link, `${o.link.prefix}:result:${job.id}`, out, Math.max(1_000, d.deadline - o.link.now() + 5_000)) }
      } catch (err) {
        const e = err as { code?: string; message?: string }
        return { error: { ...(e.code ? { code: e.code } : {}), message: e.message ?? String(err) } }
      }
    },
    { connection: o.link.connection(true), prefix: o.link.prefix, concurrency, lockDuration: lockMs, stalledInterval: Math.max(500, lockMs / 2), maxStalledCount: 1, autorun: true },
  )
  worker.on('error', () => undefined)
  await worker.waitUntilReady()
  const stopAnnouncing = announce(o.link, o.queue, `${hostname()}:${process.pid}:${o.runner.name}`, concurrency)
  return {
    async close() {
      await stopAnnouncing()
      // Finishes the batches it holds and takes no new ones. With Redis gone it cannot hand
      // answers back, so it waits no longer than a lock lasts (others run those batches anyway).
      const closing = worker.close().catch(() => undefined)
      const cap = new Promise<void>((resolve) => {
        const t = setInterval(() => o.link.unavailable() !== undefined && setTimeout(resolve, lockMs + 1_000).unref(), 500)
        t.unref()
        void closing.then(() => clearInterval(t))
      })
      await Promise.race([closing, cap])
    },
  }
}
