import { ignore } from '../../errors/index.js'
import type { RedisLink } from './link.js'

// Who serves a runner's queue: remote workers (and how many batches each takes at once) and
// API servers. Each refreshes its entry every second; one not refreshed for three seconds
// (on Redis's clock, which every machine shares) is gone. API servers read it to size their
// batchers' slots — their share of the workers — and for metrics.

const TTL_MS = 3_000
export type Role = 'workers' | 'apis'
const key = (link: RedisLink, queue: string, role: Role) => `${link.prefix}:${role}:${queue}`

/** A worker (or API server) announces itself until the returned function is called. */
export function announce(
  link: RedisLink,
  queue: string,
  id: string,
  concurrency: number,
  role: Role = 'workers',
): () => Promise<void> {
  const beat = () =>
    link
      .client()
      .hset(key(link, queue, role), id, `${concurrency}|${link.now() + TTL_MS}`)
      .catch(ignore('a missed heartbeat: the next one writes it, and a stale entry expires'))
  void beat()
  const timer = setInterval(beat, 1_000)
  timer.unref()
  return async () => {
    clearInterval(timer)
    await link
      .client()
      .hdel(key(link, queue, role), id)
      .catch(ignore('the entry expires by itself'))
  }
}

/** Live members of a queue (workers or API servers) and the batches they take at once, in total. */
export async function capacity(
  link: RedisLink,
  queue: string,
  role: Role = 'workers',
): Promise<{ workers: number; slots: number }> {
  const all = await link.client().hgetall(key(link, queue, role))
  const now = link.now()
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
  if (gone.length)
    await link
      .client()
      .hdel(key(link, queue, role), ...gone)
      .catch(ignore('the entries expire by themselves'))
  return { workers, slots }
}
