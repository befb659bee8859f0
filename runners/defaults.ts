import { DEFAULT_DEADLINE_MS, DEFAULT_MAX_DELAY_MS } from './batching/dispatcher.js'

/**
 * Every runner default in one place: what a runner runs with when neither its code, a serve
 * config file nor the environment says otherwise. /runners, /v2 config and the batcher all read
 * them from here (resolveBatching), so they cannot disagree.
 */
export const RUNNER_DEFAULTS = {
  maxBatchSize: 32,
  /** The batch window (Triton's max_queue_delay): the longest a request is held to fill a batch. */
  maxDelayMs: DEFAULT_MAX_DELAY_MS,
  /** Queue plus run: a request that cannot finish within it is refused early. */
  deadlineMs: DEFAULT_DEADLINE_MS,
  /** A batch running longer fails with E_RUNNER_TIMEOUT and its worker is recycled. */
  timeoutMs: 30_000,
  /** Batches handed to each worker at once: the next is there when the current one ends. */
  batchesPerWorker: 2,
  /**
   * Workers of a custom runner, a GPU runner and one the autoscaler grows (maxWorkers); a local CPU
   * onnx runner starts two where a second copy of its model fits (onnx/threads.ts, defaultCpuWorkers).
   */
  workers: 1,
  /** Workers as child processes: a crash takes only the worker (threads are an opt-in). */
  isolation: 'process',
  /** How often the autoscaler decides, between minWorkers and maxWorkers. */
  scaleIntervalMs: 2_000,
} as const

/** Requests that may wait per runner method, for a batch size (memory bound). */
export const defaultMaxQueueSize = (maxBatchSize: number): number => 64 * maxBatchSize

export interface BatchingInput {
  deadlineMs?: number | undefined
  timeoutMs?: number | undefined
  batchesPerWorker?: number | undefined
  batching?:
    | {
        enabled?: boolean | undefined
        maxBatchSize?: number | undefined
        maxDelayMs?: number | undefined
        maxLatencyMs?: number | undefined
        maxQueueSize?: number | undefined
      }
    | undefined
}

export interface ResolvedBatching {
  enabled: boolean
  maxBatchSize: number
  maxDelayMs: number
  deadlineMs: number
  maxQueueSize: number
  batchesPerWorker: number
  timeoutMs: number
}

/**
 * The batching a runner runs with. `batching.maxLatencyMs` is the name deadlineMs had before
 * the batch window and the deadline were two settings: it still sets the deadline.
 */
export function resolveBatching(o: BatchingInput): ResolvedBatching {
  const b = o.batching ?? {}
  const maxBatchSize = b.maxBatchSize ?? RUNNER_DEFAULTS.maxBatchSize
  return {
    enabled: b.enabled ?? true,
    maxBatchSize,
    maxDelayMs: b.maxDelayMs ?? RUNNER_DEFAULTS.maxDelayMs,
    deadlineMs: o.deadlineMs ?? b.maxLatencyMs ?? RUNNER_DEFAULTS.deadlineMs,
    maxQueueSize: b.maxQueueSize ?? defaultMaxQueueSize(maxBatchSize),
    batchesPerWorker: o.batchesPerWorker ?? RUNNER_DEFAULTS.batchesPerWorker,
    timeoutMs: o.timeoutMs ?? RUNNER_DEFAULTS.timeoutMs,
  }
}
