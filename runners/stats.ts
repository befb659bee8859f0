import type { DispatchObserver } from './batching/dispatcher.js'

export interface Duration {
  count: number
  ns: number
}

const add = (d: Duration, ms: number) => {
  d.count++
  d.ns += Math.round(ms * 1e6)
}

/**
 * What the Open Inference Protocol's statistics extension reports for a model: requests that
 * succeeded or failed and how long they took, time spent queued and computing, per batch size.
 * Fed by the dispatcher (batches) and by the runner (whole requests).
 */
export class RunnerStats {
  inferenceCount = 0
  executionCount = 0
  lastInference = 0
  readonly success: Duration = { count: 0, ns: 0 }
  readonly fail: Duration = { count: 0, ns: 0 }
  readonly queue: Duration = { count: 0, ns: 0 }
  readonly computeInfer: Duration = { count: 0, ns: 0 }
  private readonly byBatch = new Map<number, Duration>()

  /** A request finished (rows: its batch-dimension size). */
  request(ok: boolean, rows: number, ms: number): void {
    add(ok ? this.success : this.fail, ms)
    if (ok) this.inferenceCount += rows
    this.lastInference = Date.now()
  }

  observer(): DispatchObserver {
    return {
      batch: (rows, waited, ms, ok) => {
        for (const w of waited) add(this.queue, w)
        if (!ok) return
        this.executionCount++
        add(this.computeInfer, ms)
        let b = this.byBatch.get(rows)
        if (b === undefined) this.byBatch.set(rows, (b = { count: 0, ns: 0 }))
        add(b, ms)
      },
      rejected: () => undefined,
    }
  }

  batchStats(): { batch_size: number; compute_infer: Duration }[] {
    return [...this.byBatch]
      .sort((a, b) => a[0] - b[0])
      .map(([batch_size, d]) => ({ batch_size, compute_infer: { ...d } }))
  }
}

/** Both observers see every event (metrics and statistics). */
export const bothObservers = (a: DispatchObserver | undefined, b: DispatchObserver): DispatchObserver =>
  a === undefined
    ? b
    : {
        batch: (...args) => {
          a.batch(...args)
          b.batch(...args)
        },
        rejected: (reason) => {
          a.rejected(reason)
          b.rejected(reason)
        },
      }
