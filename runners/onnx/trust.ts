import { type ModelInfo, type ModelStore, type TrustedKey, verifyModel } from '../../store/index.js'

// The operator's trust policy (`bundle serve --trust`, `bundle worker --trust`, BUNDLE_TRUST): the
// public keys whose signatures a model must carry before any runner of this process loads it. It
// is the process's, as the policy is the operator's: set once at start, before the first runner
// starts, and read by every load — start-up, repository loads, version swaps, on-demand loads.

let trusted: readonly TrustedKey[] | undefined

/** Sets (or with undefined, clears) the keys every model must be signed by before it loads. */
export function setModelTrust(keys: readonly TrustedKey[] | undefined): void {
  trusted = keys?.length ? [...keys] : undefined
}

/** The keys in force, if a policy is set. */
export function modelTrust(): readonly TrustedKey[] | undefined {
  return trusted
}

/**
 * Before a model loads: with a policy set, its signature and every file as stored are verified
 * (a coded E_SIG_* error refuses it, and nothing of it runs); without one, nothing happens.
 */
export async function verifyBeforeLoad(store: ModelStore, model: ModelInfo): Promise<void> {
  if (trusted === undefined) return
  await verifyModel(store, model, trusted)
}
