import type { RedisLink } from './link.js'

/** Where a runner in remote mode sends its batches: the Redis link and the runner's queue. */
export interface RemoteTarget {
  link: RedisLink
  queue: string
}
