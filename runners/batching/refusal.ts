import { BundleError } from '../../errors/index.js'

/**
 * Why a request was shed: `queue_full` — more than maxQueueSize requests wait; `admission` — on
 * arrival, the work queued ahead (at its priority or above) could not finish before its
 * deadline; `deadline` — it waited and could no longer finish in time in the batch it would go into.
 */
export type RejectReason = 'queue_full' | 'admission' | 'deadline'

const PACE = Symbol.for('modelbundle.refusalPaceMs')
const REASON = Symbol.for('modelbundle.refusalReason')

/**
 * The refusal of a request a runner cannot take in time. It costs next to nothing (a storm of
 * them is exactly when CPU is short): no stack. `paceMs`: how much later than its deadline it
 * would have finished — about when room opens for it (see refusalPace).
 */
export function overloaded(why: string, reason: RejectReason, paceMs?: number): BundleError {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    const err = new BundleError('E_RUNNER_OVERLOADED', why)
    if (paceMs !== undefined) Object.defineProperty(err, PACE, { value: paceMs })
    Object.defineProperty(err, REASON, { value: reason })
    return err
  } finally {
    Error.stackTraceLimit = limit
  }
}

/**
 * For a request refused on arrival: how long until the runner would probably have room for it
 * (how much later than its deadline it would have finished had it been queued). A server answers
 * such a refusal no sooner than that, when it is short: a client that resends the moment it is
 * refused then comes back when its request can be taken, instead of spinning through refusals
 * that take the CPU the runner needs (see docs/batching.md, "No collapse").
 */
export function refusalPace(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null ? (err as Record<symbol, number | undefined>)[PACE] : undefined
}

/**
 * Why a runner refused a request (E_RUNNER_OVERLOADED), if it did: a protocol that tells a
 * full queue from a deadline that cannot be met (gRPC's UNAVAILABLE vs DEADLINE_EXCEEDED) asks.
 */
export function refusalReason(err: unknown): RejectReason | undefined {
  return typeof err === 'object' && err !== null ? (err as Record<symbol, RejectReason | undefined>)[REASON] : undefined
}
