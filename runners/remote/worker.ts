import { hostname } from 'node:os'
import { Worker } from 'bullmq'
import { announce } from './capacity.js'
import type { RedisLink } from './link.js'
import { pack, unpack, type JobData, type JobResult } from './payload.js'

/** A started runner as a remote worker uses it: runs one formed batch on its own worker processes. */
export interface Executor {
  readonly name: string
  execute(method: string, args: unknown): Promise<unknown>
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
      if (Date.now() > d.deadline) return { error: { code: 'E_RUNNER_TIMEOUT', message: `runner ${o.runner.name}: the batch waited past its deadline and was not run` }, stale: true }
      try {
        const out = await o.runner.execute(d.method, await unpack(o.link, d.args, false))
        return { ok: await pack(o.link, `${o.link.prefix}:result:${job.id}`, out, Math.max(1_000, d.deadline - Date.now() + 5_000)) }
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
      // Finishes the batches it holds and takes no new ones; with Redis gone, waits no longer
      // than a lock lasts (those batches go to other workers anyway).
      await Promise.race([worker.close().catch(() => undefined), new Promise((r) => setTimeout(r, lockMs + 1_000).unref())])
    },
  }
}
