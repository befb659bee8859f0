import { ignore } from '../../errors/index.js'
/** Queues seen started: a start that succeeded cannot fail later, so each is asked once. */
const started = new WeakSet<object>()

/**
 * BullMQ keeps the failure of a queue's start (a Redis version check it sends the moment its
 * connection is up): when Redis drops in those few milliseconds, every later call on that queue
 * fails with the same error, for good — seen as task calls failing for as long as the server ran
 * after a Redis restart, every connection of its own long back. Returns `q` when it started, or a
 * new one from `open` (the broken one closed quietly). Ask only while Redis is reachable: during
 * an outage a new queue would fail to start as well.
 */
export async function startedQueue<Q extends { waitUntilReady(): Promise<unknown>; close(): Promise<void> }>(
  q: Q,
  open: () => Q,
): Promise<Q> {
  if (started.has(q)) return q
  const broken = await q.waitUntilReady().then(
    () => false,
    () => true,
  )
  if (!broken) {
    started.add(q)
    return q
  }
  q.close().catch(ignore('a queue that never started has nothing to close'))
  return open()
}
