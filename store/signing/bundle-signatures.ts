import { createHash, createPublicKey } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { BundleError } from '../../errors/index.js'
import type { ModelStore } from '../model-store.js'
import type { BundleInfo, BundleModelRef } from '../types.js'
import { openSignature, type SignatureBundle, signStatement } from './envelope.js'
import { loadPrivateKey, type TrustedKey } from './keys.js'
import { layOutSignature } from './lay-out.js'
import { signatureHint, storedSignature, verifyModel } from './model-signatures.js'
import { readStatement, statementFor } from './statement.js'
import { assertRecorded, compareFiles, type FileOnDisk, hashFiles, type Verified } from './verify.js'

// A bundle's signature: the same OMS v1.0 statement as a model's, over every file of the bundle
// directory (bundle.json — the manifest with its pinned models and their digests — the compiled
// code, the Dockerfile, …) and, for each pinned model, its own signature (as the resource
// `modelbundle-models/NAME/VERSION/model.sig`). A bundle that verifies thus names models that
// verify; verifying a bundle verifies those models too.

/** The signature file beside a bundle's files (in a bundle directory, and in an image). */
export const BUNDLE_SIG = 'bundle.sig'
const MODEL_SIGS = 'modelbundle-models'

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/**
 * Whether `dir` is an image's /app (BUNDLE_IMAGE_APP, set by the image): there the bundle's files
 * sit beside the npm packages the image vendored for it (listed in its SBOM, not in its signature).
 * Anywhere else a bundle directory holds no node_modules: one there is a file the signature does
 * not list, and is refused (it would change what the bundle's imports load).
 */
function isImageApp(dir: string): boolean {
  const app = process.env.BUNDLE_IMAGE_APP
  return app !== undefined && app !== '' && resolve(app) === resolve(dir)
}

/** Every file of a bundle directory (relative POSIX paths), bundle.sig left out. */
function dirFiles(dir: string): FileOnDisk[] {
  const vendored = isImageApp(dir)
  const out: FileOnDisk[] = []
  const walk = (rel: string) => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${e.name}` : e.name
      if (e.isDirectory()) {
        if (!(vendored && path === 'node_modules')) walk(path)
      } else if (path !== BUNDLE_SIG) out.push({ path, file: join(dir, path) })
    }
  }
  walk('')
  return out
}

/** The bundle's pinned models, from its bundle.json. */
function pinnedModels(dir: string): BundleModelRef[] {
  try {
    const m = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8')) as { models?: BundleModelRef[] }
    return m.models ?? []
  } catch {
    throw new BundleError('E_BUNDLE_INVALID', `${dir} holds no readable bundle.json`)
  }
}

/** What a bundle's statement lists: its files' digests and its models' signatures' digests. */
async function bundleDigests(store: ModelStore, dir: string, requireSigned: boolean): Promise<Map<string, string>> {
  const digests = await hashFiles(dirFiles(dir))
  for (const ref of pinnedModels(dir)) {
    const [name, version] = ref.tag.split(':') as [string, string]
    let sig: string | undefined
    try {
      sig = storedSignature(store, store.get(ref.tag))
    } catch {
      sig = undefined // a model the store lacks: its entry is missing, which verification names
    }
    if (sig === undefined) {
      if (requireSigned)
        throw new BundleError(
          'E_SIG_UNSIGNED',
          `model ${ref.tag} of the bundle is not signed: sign it first (bundle models sign ${ref.tag} --key KEY)`,
        )
      continue
    }
    const key = `${MODEL_SIGS}/${name}/${version}/model.sig`
    // A bundle file of that name would have its content stand in for the model's signature.
    if (digests.has(key))
      throw new BundleError('E_SIG_MALFORMED', `the bundle holds a file named ${key}, a name its signature reserves`)
    digests.set(key, sha256(sig))
  }
  return digests
}

/** `bundle sign BUNDLE_TAG --key KEY`: signs the bundle's files and its models' signatures. */
export async function signBundle(
  store: ModelStore,
  tag: string,
  keyFile: string,
): Promise<{ bundle: BundleInfo; signature: SignatureBundle }> {
  const key = loadPrivateKey(keyFile)
  const { bundle, dir } = await store.bundles.paths(tag)
  const digests = await bundleDigests(store, dir, true)
  assertRecorded(`bundle ${bundle.tag}`, digests, new Map(bundle.files.map((f) => [f.path, f.sha256])))
  const statement = statementFor(bundle.name, digests)
  const signature = signStatement(statement, key, createPublicKey(key))
  putBundleSignature(store, bundle.tag, `${JSON.stringify(signature, null, 2)}\n`)
  return { bundle, signature }
}

/** Stores `text` as a bundle version's signature (replacing one it had), byte for byte. */
export function putBundleSignature(store: ModelStore, tag: string, text: string): void {
  store.write(() => {
    store.db
      .prepare(
        'INSERT INTO bundle_signatures (bundle_id, bundle, key_hint, created_at) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (bundle_id) DO UPDATE SET bundle = excluded.bundle, key_hint = excluded.key_hint, ' +
          'created_at = excluded.created_at',
      )
      .run(store.bundles.resolve(tag).id, text, signatureHint(text), Date.now())
  })
}

/** The bundle.sig text stored with a bundle version, if it was signed. */
export function storedBundleSignature(store: ModelStore, tag: string): string | undefined {
  const id = store.bundles.resolve(tag).id
  const row = store.db.prepare('SELECT bundle FROM bundle_signatures WHERE bundle_id = ?').get(id) as
    | { bundle: string }
    | undefined
  return row?.bundle
}

/**
 * A stored bundle's directory with its signature beside its files as bundle.sig (when signed; a
 * stale one is removed). `laidOut`: false when the store is read-only and it could not be written.
 */
export async function signedBundleDir(
  store: ModelStore,
  tag: string,
): Promise<{ bundle: BundleInfo; dir: string; laidOut: boolean }> {
  const { bundle, dir } = await store.bundles.paths(tag)
  const laidOut = layOutSignature(dir, BUNDLE_SIG, storedBundleSignature(store, bundle.tag))
  return { bundle, dir, laidOut }
}

/**
 * Verifies a bundle directory (its bundle.sig, or `signature` when given) against the trusted
 * keys: the signature, every file, each pinned model's signature as signed — and then each model
 * itself (its signature and files, from `store`). Refuses with the E_SIG_* code of what is wrong.
 */
export async function verifyBundleDir(
  store: ModelStore,
  dir: string,
  trusted: readonly TrustedKey[],
  signature?: string,
): Promise<Verified & { models: Verified[] }> {
  const text =
    signature ?? (existsSync(join(dir, BUNDLE_SIG)) ? readFileSync(join(dir, BUNDLE_SIG), 'utf8') : undefined)
  if (text === undefined)
    throw new BundleError('E_SIG_UNSIGNED', `the bundle in ${dir} has no signature (bundle.sig) and trust is set`)
  const { payload, signer } = openSignature(text, trusted)
  const statement = readStatement(payload)
  compareFiles(statement.predicate.resources, await bundleDigests(store, dir, false))
  const models: Verified[] = []
  for (const ref of pinnedModels(dir)) models.push(await verifyModel(store, store.get(ref.tag), trusted))
  return {
    signer: signer.file,
    hint: signer.hint,
    subject: statement.subject[0]!.name,
    files: statement.predicate.resources.length,
    models,
  }
}

/** Verifies a stored bundle (its stored signature over its checked-out files) and its models. */
export async function verifyBundle(
  store: ModelStore,
  tag: string,
  trusted: readonly TrustedKey[],
): Promise<Verified & { models: Verified[] }> {
  const { bundle, dir } = await store.bundles.paths(tag)
  const sig = storedBundleSignature(store, bundle.tag)
  if (sig === undefined) throw new BundleError('E_SIG_UNSIGNED', `bundle ${bundle.tag} is not signed and trust is set`)
  return verifyBundleDir(store, dir, trusted, sig)
}
