import type { DispatcherStats } from './batching/dispatcher.js'
import type { WorkerPool } from './pool/worker-pool.js'

/** Where the autoscaler reads the current generation (a swap or an idle unload replaces it). */
export interface ScaleTarget {
  dispatcher(): { stats(): DispatcherStats; setSlots(slots: number): void } | undefined
  pool(): WorkerPool | undefined
}

/**
 * Scales a runner's workers between `min` and `max`: samples the batcher ten times per
 * interval; a busy interval with a queue adds a worker, two quiet intervals in a row remove one.
 * Returns the function that stops it. The timer never keeps the process alive.
 */
export function autoscale(target: ScaleTarget, o: { min: number; max: number; intervalMs: number }): () => void {
  let scaling = false
  let samples = 0
  let busy = 0
  let queued = 0
  let quiet = 0
  const timer = setInterval(
    () => {
      const d = target.dispatcher()
      const pool = target.pool()
      if (d === undefined || pool === undefined || scaling) return
      const s = d.stats()
      samples++
      busy += s.inFlight / Math.max(1, pool.size)
      if (s.queuedRows > 0) queued++
      if (samples < 10) return
      const avgBusy = busy / samples
      const withQueue = queued / samples
      samples = busy = queued = 0
      if (avgBusy >= 0.85 && withQueue >= 0.5 && pool.size < o.max) {
        quiet = 0
        scaling = true
        pool
          .grow()
          .then(() => d.setSlots(pool.size))
          .catch(() => undefined) // a worker that cannot start: try again next interval
          .finally(() => (scaling = false))
      } else if (avgBusy < 0.3 && pool.size > o.min) {
        if (++quiet < 2) return
        quiet = 0
        scaling = true
        d.setSlots(pool.size - 1)
        pool
          .shrink()
          .catch(() => undefined)
          .finally(() => (scaling = false))
      } else quiet = 0
    },
    Math.max(10, o.intervalMs / 10),
  )
  timer.unref()
  return () => clearInterval(timer)
}
