import { createHash, createPublicKey, type KeyObject } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { BundleError } from '../../errors/index.js'
import { openSignature, type SignatureBundle, signStatement } from './envelope.js'
import { IGNORED_PATHS, readStatement, type Resource, statementFor } from './statement.js'
import type { TrustedKey } from './keys.js'

/** A model file as verification reads it: its path inside the model and where its bytes are. */
export interface FileOnDisk {
  path: string
  file: string
}

/** What a verified signature says: who signed, what it was made for, how many files it covers. */
export interface Verified {
  signer: string
  hint: string
  subject: string
  files: number
}

const ignored = (path: string) => IGNORED_PATHS.some((p) => path === p || path.startsWith(`${p}/`))

/**
 * One file's sha256. An async iterator over 1 MiB reads keeps the next read in flight while a chunk
 * is hashed (measured 1.2–1.4× faster here than 'data' events, 1.6× faster than awaiting each read).
 */
async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256')
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer)
  return h.digest('hex')
}

/**
 * Each file's sha256 (one read of every byte), by path. `skipIgnored`: leave out model.sig and
 * version-control files, as model_signing does for a directory on disk; a stored model's files are
 * all hashed (any of them could be the one a runner opens).
 */
export async function hashFiles(files: readonly FileOnDisk[], skipIgnored = false): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const f of files) {
    if (skipIgnored && ignored(f.path)) continue
    try {
      out.set(f.path, await sha256File(f.file))
    } catch (err) {
      throw new BundleError('E_SIG_FILE_MISSING', `${f.path}: ${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`)
    }
  }
  return out
}

/**
 * Signs a model's files: hashes each, checks the bytes are still the ones the store recorded
 * (a signature must never bless a changed blob), and signs the statement listing them.
 */
export async function signFiles(
  name: string,
  files: readonly FileOnDisk[],
  recorded: ReadonlyMap<string, string>,
  privateKey: KeyObject,
): Promise<SignatureBundle> {
  const digests = await hashFiles(files)
  assertRecorded(name, digests, recorded)
  return signStatement(statementFor(name, digests), privateKey, createPublicKey(privateKey))
}

/** Every hashed file has the sha256 the store recorded for it; else the store is damaged: nothing is signed. */
export function assertRecorded(
  label: string,
  digests: ReadonlyMap<string, string>,
  recorded: ReadonlyMap<string, string>,
): void {
  const changed = [...recorded].filter(([path, sha]) => digests.get(path) !== sha).map(([path]) => path)
  if (changed.length)
    throw new BundleError(
      'E_STORE_CORRUPT',
      `${label}: ${list(changed)} no longer hold the bytes the store recorded; nothing was signed (run \`bundle ` +
        'models verify`)',
    )
}

/**
 * Verifies a model's files against its signature (model.sig's text) and the trusted keys:
 * the bundle, the signer, the signature over the statement, then every file's bytes. Refuses with
 * the code of what is wrong; nothing is loaded by the caller unless this resolves.
 */
export async function verifyFiles(
  signature: string | undefined,
  files: readonly FileOnDisk[],
  trusted: readonly TrustedKey[],
  /** The model's name: a signature made for another name whose files share nothing with these is another model's. */
  name?: string,
): Promise<Verified> {
  if (signature === undefined)
    throw new BundleError('E_SIG_UNSIGNED', 'the model has no signature (model.sig) and trust is set')
  const { payload, signer } = openSignature(signature, trusted)
  const statement = readStatement(payload)
  const resources = statement.predicate.resources
  const subject = statement.subject[0]!.name
  compareFiles(resources, await hashFiles(files), name !== undefined && subject !== name ? subject : undefined)
  return { signer: signer.file, hint: signer.hint, subject: statement.subject[0]!.name, files: resources.length }
}

/**
 * The signed list against the files as they are now; throws the first kind of difference found,
 * naming every one. `otherSubject`: the name the signature was made for, when it is not this
 * model's — with no file in common too, the signature is another model's, not a changed copy.
 */
export function compareFiles(
  signed: readonly Resource[],
  actual: ReadonlyMap<string, string>,
  otherSubject?: string,
): void {
  const actualDigests = new Set(actual.values())
  if (otherSubject !== undefined && !signed.some((r) => actualDigests.has(r.digest)))
    throw new BundleError(
      'E_SIG_WRONG_MODEL',
      `the signature is ${otherSubject}'s: none of the ${signed.length} files it lists ` +
        `(${list(signed.map((r) => r.name))}) is a file of this model (${list([...actual.keys()])})`,
    )
  const signedNames = new Set(signed.map((r) => r.name))
  const modified: string[] = []
  const missing: string[] = []
  const renamed: string[] = []
  const renamedTo = new Set<string>()
  for (const r of signed) {
    const now = actual.get(r.name)
    if (now === r.digest) continue
    if (now !== undefined) {
      modified.push(r.name)
      continue
    }
    const moved = [...actual].find(([path, d]) => d === r.digest && !signedNames.has(path) && !renamedTo.has(path))
    if (moved) {
      renamed.push(`${r.name} → ${moved[0]}`)
      renamedTo.add(moved[0])
    } else missing.push(r.name)
  }
  const added = [...actual.keys()].filter((p) => !signedNames.has(p) && !renamedTo.has(p))
  if (modified.length)
    throw new BundleError('E_SIG_FILE_MODIFIED', `content differs from what was signed: ${list(modified)}`)
  if (renamed.length) throw new BundleError('E_SIG_FILE_RENAMED', `signed files under other names: ${list(renamed)}`)
  if (missing.length) throw new BundleError('E_SIG_FILE_MISSING', `signed files not in the model: ${list(missing)}`)
  if (added.length) throw new BundleError('E_SIG_FILE_ADDED', `files the signature does not list: ${list(added)}`)
}

const list = (names: readonly string[]) =>
  names.length > 6 ? `${names.slice(0, 6).join(', ')}, … (${names.length})` : names.join(', ')
