import type { RedisLink } from './link.js'

// Which remote workers serve a runner's queue, and how many batches each takes at once: every
// worker refreshes its entry each second; an entry not refreshed for three seconds is a worker
// that is gone. API servers read it to size their batchers' slots and for metrics.

const TTL_MS = 3_000
const key = (link: RedisLink, queue: string) => `${link.prefix}:workers:${queue}`

/** A worker announces itself until the returned function is called. */
export function announce(link: RedisLink, queue: string, id: string, concurrency: number): () => Promise<void> {
  const beat = () => link.client().hset(key(link, queue), id, `${concurrency}|${Date.now() + TTL_MS}`).catch(() => undefined)
  void beat()
  const timer = setInterval(beat, 1_000)
  timer.unref()
  return async () => {
    clearInterval(timer)
    await link.client().hdel(key(link, queue), id).catch(() => undefined)
  }
}

/** Live workers of a queue and the batches they take at once, in total. */
export async function capacity(link: RedisLink, queue: string): Promise<{ workers: number; slots: number }> {
  const all = await link.client().hgetall(key(link, queue))
  const now = Date.now()
  let workers = 0
  let slots = 0
  const gone: string[] = []
  for (const [id, v] of Object.entries(all)) {
    const [c, until] = v.split('|').map(Number) as [number, number]
    if (!(until > now)) {
      gone.push(id)
      continue
    }
    workers++
    slots += c > 0 ? c : 1
  }
  if (gone.length) await link.client().hdel(key(link, queue), ...gone).catch(() => undefined)
  return { workers, slots }
}
