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
 * Why a request failed, as Triton's nv_inference_request_failure labels it: shed by the
 * scheduler (REJECTED), its client gone (CANCELED), the model or its worker failed (BACKEND),
 * anything else, such as inputs the model does not take (OTHER).
 */
export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER'
export const FAILURE_REASONS: readonly FailureReason[] = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']

const REASON_OF_CODE: Record<string, FailureReason> = {
  E_RUNNER_OVERLOADED: 'REJECTED',
  E_REMOTE_NO_WORKERS: 'REJECTED',
  E_HTTP_CLIENT_CLOSED: 'CANCELED',
  E_RUNNER_CRASHED: 'BACKEND',
  E_RUNNER_TIMEOUT: 'BACKEND',
  E_RUNNER_BATCH_DIM: 'BACKEND',
  E_SEQUENCE_LOST: 'BACKEND',
  E_REMOTE_UNAVAILABLE: 'BACKEND',
}

/** The failure reason of an error a request failed with; an uncoded one came from the model run. */
export function failureReason(err: unknown): FailureReason {
  if ((err as Error | undefined)?.name === 'AbortError') return 'CANCELED'
  const code = (err as { code?: unknown } | undefined)?.code
  if (typeof code !== 'string' || !code.startsWith('E_')) return 'BACKEND'
  return REASON_OF_CODE[code] ?? 'OTHER'
}

/**
 * Time successful batches spent on each request in them, in ns, as Triton accounts it: every
 * request in a batch counts the batch's whole input, compute and output time, so a stage's sum
 * over the requests that succeeded, divided by their number, is its mean per request.
 */
export interface RequestStages {
  queueNs: number
  inputNs: number
  inferNs: number
  outputNs: number
}

/**
 * What the Open Inference Protocol's statistics extension reports for a model: requests that
 * succeeded or failed and how long they took, time spent queued and computing, per batch size.
 * Fed by the dispatcher (batches) and by the runner (whole requests). Triton's metrics
 * (`--metrics-compat triton`) read the same numbers, plus `stages` and `failures`.
 */
export class RunnerStats {
  inferenceCount = 0
  executionCount = 0
  lastInference = 0
  readonly success: Duration = { count: 0, ns: 0 }
  readonly fail: Duration = { count: 0, ns: 0 }
  readonly queue: Duration = { count: 0, ns: 0 }
  readonly computeInfer: Duration = { count: 0, ns: 0 }
  readonly stages: RequestStages = { queueNs: 0, inputNs: 0, inferNs: 0, outputNs: 0 }
  readonly failures: Record<FailureReason, number> = { REJECTED: 0, CANCELED: 0, BACKEND: 0, OTHER: 0 }
  private readonly byBatch = new Map<number, Duration>()

  /** A request finished (rows: its batch-dimension size); `err`: what it failed with. */
  request(ok: boolean, rows: number, ms: number, err?: unknown): void {
    add(ok ? this.success : this.fail, ms)
    if (ok) this.inferenceCount += rows
    else this.failures[failureReason(err)]++
    this.lastInference = Date.now()
  }

  observer(): DispatchObserver {
    return {
      batch: (rows, waited, ms, ok, stages) => {
        for (const w of waited) add(this.queue, w)
        if (!ok) return
        this.executionCount++
        add(this.computeInfer, ms)
        let b = this.byBatch.get(rows)
        if (b === undefined) this.byBatch.set(rows, (b = { count: 0, ns: 0 }))
        add(b, ms)
        const s = this.stages
        const n = waited.length
        for (const w of waited) s.queueNs += Math.round(w * 1e6)
        s.inputNs += Math.round((stages?.inputMs ?? 0) * 1e6) * n
        s.inferNs += Math.round((stages?.computeMs ?? ms) * 1e6) * n
        s.outputNs += Math.round((stages?.outputMs ?? 0) * 1e6) * n
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
        cancelled: (rows) => {
          a.cancelled?.(rows)
          b.cancelled?.(rows)
        },
      }
