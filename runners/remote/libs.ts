import { createRequire } from 'node:module'
import type * as BullMQ from 'bullmq'
import type * as IORedis from 'ioredis'

// BullMQ and ioredis load on first use, by a server with a remote runner or @task APIs (or a
// remote worker): together about 6 MB of heap and a tenth of a second at start that every other
// server would carry, and mark on every full GC (docs/defaults.md, "What the API process loads").
// Both are CommonJS packages, so require gives the very copy an import elsewhere would.
const load = createRequire(import.meta.url)
let bull: typeof BullMQ | undefined
let redis: typeof IORedis | undefined

/**
 * The BullMQ module (Queue, QueueEvents, Worker, UnrecoverableError).
 * @internal its types (and ioredis's) stay out of the published declarations: they do not
 * type-check without skipLibCheck in a user's project
 */
export const bullmq = (): typeof BullMQ => (bull ??= load('bullmq') as typeof BullMQ)

/** The ioredis module (Redis). @internal as bullmq */
export const ioredis = (): typeof IORedis => (redis ??= load('ioredis') as typeof IORedis)
