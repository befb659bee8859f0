import type { Slice } from '../batching/dispatcher.js'
import { splitOutputs, stackInputs, tracesOf } from '../onnx/batch.js'
import type { WireTensor } from '../pool/protocol.js'
import { SEQUENCE_RUN, type SequenceRunArgs, type SequenceRunResult } from './protocol.js'
import type { WorkerPool } from '../pool/worker-pool.js'
import type { Frame } from './frame.js'

type Request = Record<string, WireTensor>

/** What a sequence batch needs of its pool: calls to one given worker, and which workers take calls now. */
export type PinnedPool = Pick<WorkerPool, 'gathers' | 'runOn' | 'readyWorkers'>

/**
 * One frame's answer from its batch: the model's outputs for its row; `missing` — its worker
 * holds no state for its sequence and it was no start, so it did not run; `skipped` — it had
 * failed before the batch ran and was left out.
 */
export type FrameResult = { outputs: Request } | { missing: true } | { skipped: true }

const SKIPPED: FrameResult = { skipped: true }
const MISSING: FrameResult = { missing: true }

/**
 * Runs one batch of frames (one row each, from different sequences) on `worker`, which holds
 * their state: the rows' inputs stacked as an onnx batch's, each row's sequence id and flags
 * beside them; the answer split back per frame.
 */
export async function runSequenceBatch(
  runner: string,
  pool: PinnedPool,
  worker: number,
  slices: readonly Slice<Frame>[],
  [inDim, outDim]: readonly [number, number],
  report: (ms: number) => void,
): Promise<FrameResult[]> {
  const live = slices.filter((s) => !s.payload.done)
  if (live.length === 0) return slices.map(() => SKIPPED)
  const inputs = stackInputs(
    live.map((s) => ({ payload: s.payload.wire, start: s.start, rows: s.rows })),
    inDim,
    pool.gathers,
  )
  const rows = live.map((s) => ({ id: s.payload.id, start: s.payload.start, end: s.payload.end }))
  const out = (await pool.runOn(
    worker,
    SEQUENCE_RUN,
    { inputs, rows } satisfies SequenceRunArgs,
    report,
    tracesOf(live),
  )) as SequenceRunResult
  const missing = new Set(out.missing)
  const ran = live.filter((_, i) => !missing.has(i))
  const parts = ran.length > 0 ? splitOutputs(runner, out.outputs, ran, outDim) : []
  const results = new Map<Frame, FrameResult>()
  for (const [i, s] of ran.entries()) results.set(s.payload, { outputs: parts[i]! })
  for (const [i, s] of live.entries()) if (missing.has(i)) results.set(s.payload, MISSING)
  return slices.map((s) => results.get(s.payload) ?? SKIPPED)
}
