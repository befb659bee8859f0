import { BundleError } from '../errors/index.js'
import type { Candidate } from '../framework/client/bench/search.js'

// What cli/tune.ts (the command) and cli/tune-run.ts (the run) share.

export interface TuneFlags {
  runner: string
  p99?: string
  minThroughput?: string
  budget: string
  api?: string
  input?: string
  contentType?: string
  shape?: string[]
  concurrency: string
  window: string
  maxWindows: string
  output?: string
  apiKey?: string
}

export function positive(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined
  const n = Number(v)
  if (!(n > 0) || !Number.isFinite(n)) throw new BundleError('E_CLI_USAGE', `${flag} "${v}" must be a positive number`)
  return n
}

/** The serve config file's entry for one runner with these settings (0 threads: left to the runner). */
export function runnerConfig(c: Candidate): Record<string, unknown> {
  return {
    workers: c.workers,
    ...(c.intraOpThreads > 0 ? { intraOpThreads: c.intraOpThreads } : {}),
    isolation: c.isolation,
    batchesPerWorker: c.batchesPerWorker,
    batching: { maxBatchSize: c.maxBatchSize, maxDelayMs: c.maxDelayMs },
  }
}

export const describe = (c: Candidate) =>
  `workers=${c.workers} threads=${c.intraOpThreads || 'auto'} batch=${c.maxBatchSize} window=${c.maxDelayMs}ms ` +
  `${c.isolation} batches/worker=${c.batchesPerWorker}`
