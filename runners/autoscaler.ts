import { ignore } from '../errors/index.js'
import { realClock, type Clock } from './batching/clock.js'
import type { DispatcherStats } from './batching/dispatcher.js'

/** What the autoscaler moves: a pool of workers that can add and remove one at a time. */
export interface ScalablePool {
  readonly size: number
  grow(): Promise<void>
  shrink(): Promise<void>
}

/** Where the autoscaler reads the current generation (a swap or an idle unload replaces it). */
export interface ScaleTarget {
  dispatcher(): { stats(): DispatcherStats; setSlots(slots: number): void } | undefined
  pool(): ScalablePool | undefined
}

export interface ScaleOptions {
  min: number
  max: number
  /** One decision per interval, from ten samples taken across it. */
  intervalMs: number
}

/** How busy the workers must be, and how often rows must be waiting, for a worker to be added. */
const GROW_BUSY = 0.85
const GROW_QUEUED = 0.5
/** Below this busyness for two intervals in a row, a worker is removed. */
const SHRINK_BUSY = 0.3
const SAMPLES = 10

/**
 * The scaling decision alone, without timers or workers: fed one sample at a time (batches in
 * flight, rows queued, workers now), it says when to add or remove one. An interval whose
 * workers were busy (≥ 85% of samples' worth of batches per worker) with rows waiting in at least
 * half of its samples adds a worker; two quiet intervals in a row (< 30%) remove one; anything
 * else resets the quiet count. Never beyond max or below min.
 */
export class ScalePolicy {
  private samples = 0
  private busy = 0
  private queued = 0
  private quiet = 0

  constructor(private readonly o: Pick<ScaleOptions, 'min' | 'max'>) {}

  sample(stats: Pick<DispatcherStats, 'inFlight' | 'queuedRows'>, workers: number): 'grow' | 'shrink' | undefined {
    this.samples++
    this.busy += stats.inFlight / Math.max(1, workers)
    if (stats.queuedRows > 0) this.queued++
    if (this.samples < SAMPLES) return undefined
    const avgBusy = this.busy / this.samples
    const withQueue = this.queued / this.samples
    this.samples = this.busy = this.queued = 0
    if (avgBusy >= GROW_BUSY && withQueue >= GROW_QUEUED && workers < this.o.max) {
      this.quiet = 0
      return 'grow'
    }
    if (avgBusy < SHRINK_BUSY && workers > this.o.min) {
      if (++this.quiet < 2) return undefined
      this.quiet = 0
      return 'shrink'
    }
    this.quiet = 0
    return undefined
  }
}

/**
 * Scales a runner's workers between `min` and `max` with a ScalePolicy, sampling the batcher ten
 * times per interval. While a worker is being added or removed no samples are taken. A worker
 * that cannot start is tried again after the next busy interval. Returns the function that
 * stops it; the timer never keeps the process alive.
 */
export function autoscale(target: ScaleTarget, o: ScaleOptions, clock: Clock = realClock): () => void {
  const policy = new ScalePolicy(o)
  let scaling = false
  let stopped = false
  let timer: unknown
  const every = Math.max(10, o.intervalMs / SAMPLES)
  const tick = (): void => {
    if (stopped) return
    schedule()
    const d = target.dispatcher()
    const pool = target.pool()
    if (d === undefined || pool === undefined || scaling) return
    const decision = policy.sample(d.stats(), pool.size)
    if (decision === 'grow') {
      scaling = true
      pool
        .grow()
        .then(() => d.setSlots(pool.size))
        .catch(ignore('a worker that cannot start: the next interval tries again'))
        .finally(() => (scaling = false))
    } else if (decision === 'shrink') {
      scaling = true
      d.setSlots(pool.size - 1)
      pool
        .shrink()
        .catch(ignore('a worker that does not stop in time is killed by the pool'))
        .finally(() => (scaling = false))
    }
  }
  const schedule = (): void => {
    timer = clock.setTimeout(tick, every)
    ;(timer as { unref?: () => void } | undefined)?.unref?.()
  }
  schedule()
  return () => {
    stopped = true
    clock.clearTimeout(timer)
  }
}
