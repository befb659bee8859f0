import type { Clock } from './clock.js'
import type { LatencyModel } from './latency-model.js'
import type { RejectReason } from './refusal.js'

/**
 * Where a batch's run went, in ms; the three add up to its execution time. `inputMs`: forming
 * the batch and handing its inputs to the worker (copied into shared memory or sent), measured
 * in this process; `computeMs`: the run as the worker measured it (the whole round trip when it
 * gives no measure); `outputMs`: the rest, the way back and the split of the outputs.
 */
export interface BatchStages {
  inputMs: number
  computeMs: number
  outputMs: number
}

/** Hooks for metrics; the dispatcher itself stays free of any metrics library. */
export interface DispatchObserver {
  /**
   * A batch finished: its rows, how long each of its requests waited, how long it ran (ms) and,
   * when it ran to the end, where that time went.
   */
  batch(rows: number, waitedMs: readonly number[], executionMs: number, ok: boolean, stages?: BatchStages): void
  rejected(reason: RejectReason): void
  /** A request whose caller had gone left the queue unrun (its rows still waiting). */
  cancelled?(rows: number): void
}

export interface DispatcherOptions {
  observer?: DispatchObserver
  /** Most rows in one batch. */
  maxBatchSize: number
  /**
   * The batch window: the longest a request is held back to let a batch fill (Triton's
   * max_queue_delay). Below it the wait is adaptive — only while more rows are expected soon and
   * a fuller batch raises throughput; an idle runner with nothing else coming runs at once.
   * Default 10 ms; 0 never waits.
   */
  maxDelayMs?: number
  /**
   * The longest a request may spend queued plus running; a request that cannot make it is
   * refused early (E_RUNNER_OVERLOADED), never run and thrown away. A request's own deadline
   * (submit's `deadline`: a client's timeout) can only shorten it.
   */
  deadlineMs?: number
  /** @deprecated the pre-split name of deadlineMs. */
  maxLatencyMs?: number
  /**
   * Part of the deadline kept for the way in and out of the runner — decoding, IPC, the answer —
   * so the bound holds as the client measures it. Default 10% of the deadline, at most 50 ms.
   */
  headroomMs?: number
  /** Batches that may run at once (one per worker). */
  slots: number
  /**
   * Batches a worker may hold at once (its pool's depth, default 1): with 2, the next batch is
   * handed over shortly before the worker is expected to finish the current one (or at once if
   * a full batch waits), so the worker does not idle while this process takes its answer.
   */
  depth?: number
  /** false: every request runs alone, by priority then arrival. */
  batching?: boolean
  /** Requests that may wait (memory bound); more are shed at once. Default 64 × maxBatchSize. */
  maxQueueSize?: number
  clock?: Clock
  model?: LatencyModel
}

export const DEFAULT_MAX_DELAY_MS = 10
export const DEFAULT_DEADLINE_MS = 10_000

/**
 * DispatcherOptions with the defaults filled in and checked once, so that the dispatcher's parts
 * read plain numbers. Slots are not here: they change as workers come and go (see Workers).
 */
export interface Settings {
  readonly maxBatchSize: number
  readonly maxDelayMs: number
  readonly deadlineMs: number
  readonly headroomMs: number
  readonly depth: number
  readonly batching: boolean
  readonly maxQueueSize: number
  readonly observer: DispatchObserver | undefined
}

export function settingsOf(options: DispatcherOptions): Settings {
  const deadlineMs = options.deadlineMs ?? options.maxLatencyMs ?? DEFAULT_DEADLINE_MS
  const maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS
  if (!(options.maxBatchSize >= 1) || !(deadlineMs > 0) || !(options.slots >= 1) || !(maxDelayMs >= 0))
    throw new Error('maxBatchSize, deadlineMs and slots must be positive, maxDelayMs at least 0')
  const headroomMs = options.headroomMs ?? Math.min(50, deadlineMs * 0.1)
  if (!(headroomMs >= 0 && headroomMs < deadlineMs))
    throw new Error('headroomMs must be at least 0 and below the deadline')
  return {
    maxBatchSize: options.maxBatchSize,
    maxDelayMs,
    deadlineMs,
    headroomMs,
    depth: Math.max(1, options.depth ?? 1),
    batching: options.batching ?? true,
    maxQueueSize: options.maxQueueSize ?? 64 * options.maxBatchSize,
    observer: options.observer,
  }
}
