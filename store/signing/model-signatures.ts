import { BundleError } from '../../errors/index.js'
import type { ModelStore } from '../model-store.js'
import { resolveTag } from '../resolve.js'
import type { ModelInfo } from '../types.js'
import type { SignatureBundle } from './envelope.js'
import { loadPrivateKey, type TrustedKey } from './keys.js'
import { layOutSignature } from './lay-out.js'
import { type FileOnDisk, signFiles, type Verified, verifyFiles } from './verify.js'

// Signatures kept with model versions in the store index (table model_signatures): written by
// `bundle models sign`, carried by export/import and bundles, checked before a runner loads a model
// when trust is set.

/** A stored model's files where a runner reads them (the store's checkout, hard links to its blobs). */
async function filesOnDisk(store: ModelStore, model: ModelInfo): Promise<FileOnDisk[]> {
  const { files } = await store.checkout(model.tag, model.digest, model.files)
  return model.files.map((f) => ({ path: f.path, file: files[f.path]! }))
}

/** The model.sig text stored with a model version, if it was signed. */
export function storedSignature(store: ModelStore, model: ModelInfo): string | undefined {
  const id = resolveTag(store.index, model.tag).id
  const row = store.db.prepare('SELECT bundle FROM model_signatures WHERE model_id = ?').get(id) as
    | { bundle: string }
    | undefined
  return row?.bundle
}

/** The key hint a signature names (empty when it names none, or is not JSON: verification says why). */
export function signatureHint(text: string): string {
  try {
    const hint = (JSON.parse(text) as SignatureBundle).verificationMaterial?.publicKey?.hint
    return typeof hint === 'string' ? hint : ''
  } catch {
    return ''
  }
}

/** Stores `text` as a model version's signature (replacing one it had); the text is kept byte for byte. */
export function putSignature(store: ModelStore, tag: string, text: string, hint: string): void {
  store.write(() => writeSignatureRow(store, resolveTag(store.index, tag).id, text, hint))
}

/**
 * The signature row itself, inside a write transaction the caller holds (commitModel writes it
 * with the model's row, so a saved or imported model and its signature land together).
 */
export function writeSignatureRow(store: ModelStore, modelId: number, text: string, hint = signatureHint(text)): void {
  store.db
    .prepare(
      'INSERT INTO model_signatures (model_id, bundle, key_hint, created_at) VALUES (?, ?, ?, ?) ' +
        'ON CONFLICT (model_id) DO UPDATE SET bundle = excluded.bundle, key_hint = excluded.key_hint, ' +
        'created_at = excluded.created_at',
    )
    .run(modelId, text, hint, Date.now())
}

/** Whether a model row has a signature (inside the caller's transaction). */
export function hasSignatureRow(store: ModelStore, modelId: number): boolean {
  return store.db.prepare('SELECT 1 FROM model_signatures WHERE model_id = ?').get(modelId) !== undefined
}

/** `bundle models sign TAG --key KEY`: hashes the model's files as stored and signs them. */
export async function signModel(
  store: ModelStore,
  tag: string,
  keyFile: string,
): Promise<{ model: ModelInfo; bundle: SignatureBundle }> {
  const key = loadPrivateKey(keyFile)
  const model = store.get(tag)
  const recorded = new Map(model.files.map((f) => [f.path, f.sha256]))
  const bundle = await signFiles(model.name, await filesOnDisk(store, model), recorded, key)
  putSignature(store, model.tag, `${JSON.stringify(bundle, null, 2)}\n`, bundle.verificationMaterial.publicKey.hint)
  return { model, bundle }
}

/**
 * A stored model's directory with its signature beside the files as model.sig (the name
 * model_signing gives it; a stale one from another model of the same content is removed).
 * `laidOut`: false when the store is read-only and it could not be written.
 */
export async function signedModelDir(store: ModelStore, tag: string): Promise<{ dir: string; laidOut: boolean }> {
  const { model, dir } = await store.paths(tag)
  return { dir, laidOut: layOutSignature(dir, 'model.sig', storedSignature(store, model)) }
}

/** Verifies a stored model version against the trusted keys: its signature, then every file's bytes. */
export async function verifyModel(
  store: ModelStore,
  model: ModelInfo,
  trusted: readonly TrustedKey[],
): Promise<Verified> {
  if (trusted.length === 0) throw new BundleError('E_KEY_INVALID', 'verifying needs at least one trusted public key')
  return verifyFiles(storedSignature(store, model), await filesOnDisk(store, model), trusted, model.name)
}
