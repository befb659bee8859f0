import type { RedisLink } from './link.js'

/** Where a runner in remote mode sends its batches: the Redis link and the runner's queue. */
export interface RemoteTarget {
  link: RedisLink
  queue: string
  /**
   * While no worker is live, how long a batch waits for one (ms; default 2 000, 0 = at once;
   * Infinity = until its deadline, the workers scaling to zero).
   */
  graceMs?: number
}
