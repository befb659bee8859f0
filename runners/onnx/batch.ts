import { BundleError } from '../../errors/index.js'
import type { Slice } from '../batching/dispatcher.js'
import type { Pool } from '../pool/pool.js'
import type { TraceCarrier } from '../tracing/index.js'
import type { GatheredTensor, WireTensor } from '../pool/protocol.js'
import { ONNX_RUN, type OnnxRunArgs, type OnnxRunResult } from './protocol.js'
import { concatRows, fromWire, type RunnerTensor, sliceRows, toWire } from '../tensor.js'
import type { BatchPlan } from './batch-plan.js'
import type { Request } from './generation.js'

/** One call's tensors as the batcher queues them: wire form, its rows, and which batches it may join. */
export interface OnnxRequest {
  wire: Request
  rows: number
  /** Only requests whose non-batch dimensions and dtypes agree may share a batch. */
  key: string
}

const invalid = (message: string) => new BundleError('E_INPUT_INVALID', message)

/**
 * Checks a call's inputs against the batch plan and says which batches it may join. A model that
 * runs requests as given takes the tensors whole: one unit, a batch of its own.
 */
export function onnxRequest(runner: string, inputs: Record<string, RunnerTensor>, plan: BatchPlan): OnnxRequest {
  if (!plan.batched)
    return { wire: Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, toWire(t)])), rows: 1, key: '' }
  return rowsRequest(runner, inputs, plan.dims[0])
}

/** A call's inputs as rows along `inDim`: every input must have that dimension, all of one size. */
export function rowsRequest(runner: string, inputs: Record<string, RunnerTensor>, inDim: number): OnnxRequest {
  const wire = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, toWire(t)]))
  const entries = Object.entries(wire)
  if (entries.length === 0) throw invalid(`runner ${runner} got no inputs`)
  for (const [k, t] of entries) {
    if (!(t.shape.length > inDim)) {
      throw invalid(
        `runner ${runner}: input "${k}" has shape [${t.shape.join(', ')}], ` + `which has no batch dimension ${inDim}`,
      )
    }
  }
  const [first, firstTensor] = entries[0]!
  const rows = firstTensor.shape[inDim]!
  const odd = entries.find(([, t]) => t.shape[inDim] !== rows)
  if (odd) {
    throw invalid(
      `runner ${runner}: inputs disagree on the batch size (dimension ${inDim}): ` +
        `"${first}" has ${rows}, "${odd[0]}" has ${odd[1].shape[inDim]}`,
    )
  }
  if (rows < 1) throw invalid(`runner ${runner}: the batch dimension ${inDim} is empty`)
  const key = entries.map(([k, t]) => `${k}:${t.dtype}:${t.shape.map((d, i) => (i === inDim ? '*' : d)).join('x')}`)
  return { wire, rows, key: key.join('|') }
}

/** A request's answer from the parts its rows were split into (a request larger than a batch). */
export function joinParts(parts: readonly Request[], outDim: number): Record<string, RunnerTensor> {
  const names = Object.keys(parts[0]!)
  return Object.fromEntries(
    names.map((n) => [
      n,
      fromWire(
        concatRows(
          parts.map((p) => p[n]!),
          outDim,
        ),
      ),
    ]),
  )
}

/**
 * Concatenates the slices along the batch dimension, runs one batch, splits the outputs back; a
 * model that runs requests as given gets the one request's tensors untouched and answers it whole.
 */
export async function runOnnxBatch(
  runner: string,
  pool: Pool,
  slices: readonly Slice<Request>[],
  plan: BatchPlan,
  report: (ms: number) => void,
): Promise<Request[]> {
  if (!plan.batched) {
    const args = { inputs: slices[0]!.payload } satisfies OnnxRunArgs
    return [(await pool.run(ONNX_RUN, args, report, tracesOf(slices))) as OnnxRunResult]
  }
  const [inDim, outDim] = plan.dims
  const inputs = stackInputs(slices, inDim, pool.gathers)
  const out = (await pool.run(ONNX_RUN, { inputs } satisfies OnnxRunArgs, report, tracesOf(slices))) as OnnxRunResult
  return splitOutputs(runner, out, slices, outDim)
}

/** The traced requests' carriers in a batch (undefined when none is traced: the usual case costs a scan). */
export function tracesOf(slices: readonly Slice<unknown>[]): TraceCarrier[] | undefined {
  let out: TraceCarrier[] | undefined
  for (const s of slices) if (s.trace) (out ??= []).push(s.trace)
  return out
}

/** One batch's inputs: each slice's rows, in order, along `inDim`. */
export function stackInputs(
  slices: readonly Slice<Request>[],
  inDim: number,
  gathers: boolean,
): Record<string, WireTensor | GatheredTensor> {
  const names = Object.keys(slices[0]!.payload)
  // Along dimension 0 a pool that gathers gets the requests' rows as they are (a process
  // worker's are written one after another into its shared memory): no batch buffer in between.
  const gather = inDim === 0 && gathers
  return Object.fromEntries(
    names.map((n) => {
      const parts = slices.map((s) => sliceRows(s.payload[n]!, s.start, s.rows, inDim))
      if (!gather || parts[0]!.dtype === 'string') return [n, concatRows(parts, inDim)]
      const shape = [parts.reduce((r, p) => r + p.shape[0]!, 0), ...parts[0]!.shape.slice(1)]
      return [n, { dtype: parts[0]!.dtype, shape, parts: parts.map((p) => p.data) } satisfies GatheredTensor]
    }),
  )
}

/**
 * A batch's outputs split back into each slice's rows along `outDim`, in slice order. An output
 * whose dimension there does not hold the batch's rows (its size depends on the data, not the
 * batch) is answered whole to a batch of one request, and fails a batch of several.
 */
export function splitOutputs(
  runner: string,
  out: Request,
  slices: readonly { rows: number }[],
  outDim: number,
): Request[] {
  const total = slices.reduce((n, s) => n + s.rows, 0)
  for (const [k, t] of Object.entries(out)) {
    if (t.shape.length > outDim && t.shape[outDim] === total) continue
    if (slices.length === 1) return [out]
    throw new BundleError(
      'E_RUNNER_BATCH_DIM',
      `runner ${runner}: output "${k}" has shape [${t.shape.join(', ')}] for a batch of ${total} rows: its ` +
        `dimension ${outDim} does not follow the batch, so the answers cannot be split per request; serve the ` +
        'model unbatched (batching.maxBatchSize: 0) or set batching.batchDim',
    )
  }
  let at = 0
  return slices.map((s) => {
    const part = Object.fromEntries(Object.entries(out).map(([k, t]) => [k, sliceRows(t, at, s.rows, outDim)]))
    at += s.rows
    return part
  })
}
