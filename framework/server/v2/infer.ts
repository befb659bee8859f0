import { BundleError } from '../../../errors/index.js'
import { withCallContext, type InferenceModel, type RunnerTensor } from '../../../runners/index.js'
import type { InferRequest } from './codec.js'
import { check } from './models.js'

export interface InferCall {
  /** Resolves the model again once the request has arrived (a swap meanwhile sends it to the new version). */
  resolve: () => InferenceModel
  /** The model the request named, found when it began. */
  model: InferenceModel
  /** Whether the request named a version (then it stays on that version). */
  versioned: boolean
  /** When the client stops waiting (performance.now()); the earlier of this and the request's timeout wins. */
  deadline?: number
  /** When the request arrived (performance.now()): its `timeout` parameter counts from here. */
  arrived: number
  /** True once the client has gone: its queued rows are not run. */
  gone?: () => boolean
}

export interface InferOutcome {
  model: InferenceModel
  outputs: { name: string; tensor: RunnerTensor; binary: boolean | undefined }[]
}

/**
 * When a request must be done by (performance.now()): the earlier of the client's own deadline
 * (`given`, e.g. grpc-timeout) and its `timeout` parameter counted from arrival; undefined for neither.
 */
export function requestDeadline(
  timeoutMs: number | undefined,
  arrived: number,
  given: number | undefined,
): number | undefined {
  const timeoutAt = timeoutMs === undefined ? undefined : arrived + timeoutMs
  return given === undefined ? timeoutAt : timeoutAt === undefined ? given : Math.min(given, timeoutAt)
}

/**
 * One inference of the Open Inference Protocol, the same over HTTP and gRPC: inputs checked
 * against the model, requested outputs checked, the client's deadline and priority handed to
 * the model's batcher as the request's own.
 */
export async function runInference(req: InferRequest, call: InferCall): Promise<InferOutcome> {
  let reached = false
  try {
    return await checkedInference(req, call, () => (reached = true))
  } catch (err) {
    // Refused before reaching the model (its inputs, outputs or sequence): still a failed request of
    // that model (statistics `fail`; nv_inference_request_failure, reason OTHER).
    if (!reached) call.model.stats.request(false, 0, performance.now() - call.arrived, err)
    throw err
  }
}

/** runInference; `reached` is called once the request is handed to the model, which counts it from there. */
async function checkedInference(req: InferRequest, call: InferCall, reached: () => void): Promise<InferOutcome> {
  const m = call.model
  // Names, datatypes and shapes first (and the request's other fields); only then the values.
  check(m, req.inputs)
  const known = m.outputs().map((x) => x.name)
  for (const r of req.outputs ?? [])
    if (!known.includes(r.name))
      throw new BundleError(
        'E_INPUT_INVALID',
        `unknown output "${r.name}"; ${m.name} has ${known.map((x) => `"${x}"`).join(', ')}`,
      )
  // Triton's sequence batcher: a stateful model needs each request's sequence, no other model takes one.
  if (m.sequence && req.sequence === undefined)
    throw new BundleError(
      'E_SEQUENCE_INVALID',
      `model "${m.name}" is stateful: send parameters.sequence_id with every request (and sequence_start: true ` +
        'on the first of a sequence, sequence_end: true on its last)',
    )
  if (!m.sequence && req.sequence !== undefined)
    throw new BundleError(
      'E_SEQUENCE_INVALID',
      `model "${m.name}" is not stateful: send no parameters.sequence_id (or 0) to it`,
    )
  const tensors = Object.fromEntries(req.inputs.map((i) => [i.name, i.decode()]))
  const target = call.versioned ? m : call.resolve()
  const deadline = requestDeadline(req.timeoutMs, call.arrived, call.deadline)
  const ctx = {
    ...(deadline !== undefined ? { deadline } : {}),
    ...(req.priority !== undefined ? { priority: req.priority } : {}),
    ...(call.gone ? { gone: call.gone } : {}),
  }
  reached()
  const result = await withCallContext(ctx, () =>
    target.infer(tensors, req.sequence ? { sequence: req.sequence } : undefined),
  )
  const wanted = req.outputs ?? known.map((name) => ({ name, binary: undefined }))
  return {
    model: target,
    outputs: wanted.map((w) => ({ name: w.name, tensor: result[w.name] as RunnerTensor, binary: w.binary })),
  }
}
