import type { CallTrace } from '../tracing/call-trace.js'
import type { Waiting } from './queue.js'

/**
 * Time a request's runner calls spent, summed over its calls and batches, in ms: waiting in
 * the queue, computing in the worker (as the worker measured it), and getting there and back
 * (the batch's round trip less its compute: IPC, shared memory, the worker's turn).
 */
export interface StageTimes {
  queueMs: number
  computeMs: number
  transferMs: number
}

/** What a caller may say about one request. */
export interface SubmitOptions {
  /** Requests share a batch only with the same key (input shape, dtype). */
  key?: string
  /** When the caller stops waiting, on the dispatcher's clock: shortens deadlineMs, never extends it. */
  deadline?: number | undefined
  /** 1 (most urgent) to 9; default 5 (PRIORITY.normal). */
  priority?: number | undefined
  /** Aborted: a request still queued leaves the queue and fails (its caller has gone). */
  signal?: AbortSignal | undefined
  /**
   * Asked when the request's turn comes: true means its caller has gone (a closed connection),
   * and its rows are not run. Cheaper than a signal when most callers stay.
   */
  gone?: (() => boolean) | undefined
  /** Where this request's queue, compute and transfer times are added (see StageTimes). */
  timing?: StageTimes | undefined
  /** The call's spans, when its request is traced: queue wait and batches are recorded on it. */
  trace?: CallTrace | undefined
}

/**
 * One submitted request while the dispatcher holds it. A request split across batches has
 * several parts out at once; it settles once, when the last part is back or the first fails.
 */
export interface Pending<P, R> extends Waiting {
  payload: P
  gone?: (() => boolean) | undefined
  timing?: StageTimes | undefined
  trace?: CallTrace | undefined
  parts: { start: number; result: R }[]
  outstanding: number
  failed: boolean
  resolve: (parts: R[]) => void
  reject: (err: unknown) => void
  unlisten?: () => void
}

export function fail<P, R>(item: Pending<P, R>, err: unknown): void {
  if (item.failed) return
  item.failed = true
  item.unlisten?.()
  item.reject(err)
}

/** The part of `item` from row `start` came back; the request resolves once all its rows have, in row order. */
export function partDone<P, R>(item: Pending<P, R>, start: number, result: R): void {
  item.outstanding--
  item.parts.push({ start, result })
  if (!item.failed && item.outstanding === 0 && item.next === item.rows) {
    item.unlisten?.()
    item.parts.sort((a, b) => a.start - b.start)
    item.resolve(item.parts.map((p) => p.result))
  }
}
