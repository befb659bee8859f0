import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream, mkdirSync, statSync } from 'node:fs'
import { unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import { BundleError, ignore } from '../../errors/index.js'
import { exportTarget } from './target.js'
import { modelDigest } from '../digest.js'
import { ioError, publish, removeQuietly, tempName } from '../fs-util.js'
import { validateLabels } from '../labels.js'
import { isSafeModelPath } from '../model-path.js'
import type { ModelStore } from '../model-store.js'
import { MODEL_NAMES, parseTag, validateName, validateVersion } from '../tag.js'
import type { BundleInfo, BundleModelRef, ModelFile } from '../types.js'
import { exportModel, defaultArchiveName as modelArchiveName } from './export.js'
import { importLimit } from './import.js'
import { putBundleSignature, storedBundleSignature } from '../signing/bundle-signatures.js'
import { BUNDLE_MANIFEST_NAME, FORMAT_VERSION, MAX_MANIFEST_BYTES, parseFileList } from './manifest.js'
import { readArchive } from './reader.js'
import { TarWriter } from './tar-writer.js'

export const BUNDLE_ARCHIVE_EXTENSION = '.bundle'
const MANIFEST = BUNDLE_MANIFEST_NAME
const KIND = 'modelbundle/bundle'
const FILES = 'files/'
const MODELS = 'models/'

/** A model inside a bundle archive: the bundle's pin, and the `.bundlemodel` entry carrying it. */
interface ArchivedModel extends BundleModelRef {
  entry: string
  sha256: string
  size: number
}

interface BundleArchiveManifest {
  kind: typeof KIND
  formatVersion: number
  name: string
  version: string
  digest: string
  labels: Record<string, string>
  created: string
  manifest: Record<string, unknown> & { models: BundleModelRef[] }
  files: ModelFile[]
  models: ArchivedModel[]
  /** The bundle's signature (bundle.sig) as stored, when it is signed; its models' travel in their archives. */
  bundleSig?: string
}

export const defaultBundleArchiveName = (b: Pick<BundleInfo, 'name' | 'version'>): string =>
  `${b.name}-${b.version}${BUNDLE_ARCHIVE_EXTENSION}`

const sha256Of = async (file: string): Promise<string> => {
  const h = createHash('sha256')
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer)
  return h.digest('hex')
}

/**
 * Writes a bundle and every model it pins as one gzip tar: the archive manifest first, then the
 * bundle's files, then each model as its own `.bundlemodel` (so importing reuses the model
 * archive checks). Fixed order, owners, modes and mtimes: the same bundle exports to the same bytes.
 */
export async function exportBundle(
  store: ModelStore,
  tag: string,
  out?: string,
): Promise<{ path: string; bundle: BundleInfo }> {
  const bundle = store.bundles.get(tag)
  const target = exportTarget(out, defaultBundleArchiveName(bundle))
  for (const f of bundle.files)
    if (!store.blobs.has(f.sha256))
      throw new BundleError(
        'E_STORE_CORRUPT',
        `${bundle.tag}: file ${f.path} is missing from the store; run \`bundle models verify\``,
      )
  const work = tempName(store.layout.tmp, 'bundle-export')
  const partial = join(dirname(target), `.${basename(target)}.${process.pid}-${randomBytes(4).toString('hex')}.part`)
  try {
    const models: ArchivedModel[] = []
    for (const ref of bundle.models) {
      const { path } = await exportModel(store, ref.tag, join(ensureDir(work), modelArchiveName(parseExact(ref.tag))))
      models.push({ ...ref, entry: MODELS + basename(path), sha256: await sha256Of(path), size: statSync(path).size })
    }
    const manifest: BundleArchiveManifest = {
      kind: KIND,
      formatVersion: FORMAT_VERSION,
      name: bundle.name,
      version: bundle.version,
      digest: bundle.digest,
      labels: bundle.labels,
      created: bundle.created,
      manifest: bundle.manifest as BundleArchiveManifest['manifest'],
      files: bundle.files,
      models,
      ...withSignature(storedBundleSignature(store, bundle.tag)),
    }
    const gzip = createGzip({ level: 6 })
    const written = pipeline(gzip, createWriteStream(partial, { mode: 0o644 }))
    written.catch(ignore('awaited below, where its failure is thrown'))
    const tar = new TarWriter(gzip, new Date(Date.parse(bundle.created) - (Date.parse(bundle.created) % 1000)))
    const copy = async (entry: string, file: string, size: number) => {
      await tar.begin(entry, size)
      for await (const chunk of createReadStream(file)) await tar.data(chunk as Buffer)
      await tar.end(size)
    }
    await tar.file(MANIFEST, Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`))
    for (const f of [...bundle.files].sort((a, b) => (a.path < b.path ? -1 : 1)))
      await copy(FILES + f.path, store.blobs.path(f.sha256), f.size)
    for (const m of models) await copy(m.entry, join(work, m.entry.slice(MODELS.length)), m.size)
    await tar.finish()
    gzip.end()
    await written
    publish(partial, target)
    return { path: target, bundle }
  } catch (err) {
    await unlink(partial).catch(ignore('the partial file may not exist'))
    throw ioError(err, `writing ${target}`)
  } finally {
    await removeQuietly(work)
  }
}

function ensureDir(dir: string): string {
  mkdirSync(dir, { recursive: true })
  return dir
}

function parseExact(tag: string): { name: string; version: string } {
  const q = parseTag(tag, MODEL_NAMES)
  if (q.kind !== 'version')
    throw new BundleError('E_BUNDLE_INVALID', `bundle pins ${tag}, which is not an exact name:version`)
  return { name: q.name, version: q.version }
}

const bad = (why: string) => new BundleError('E_ARCHIVE_MANIFEST_INVALID', `bundle archive manifest: ${why}`)
const isDigest = (v: unknown): v is string => typeof v === 'string' && /^sha256:[0-9a-f]{64}$/.test(v)
const isSha = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v)
const isSize = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0

/** Validates an untrusted bundle archive manifest field by field. */
function parseBundleManifest(text: string, maxBytes: number): BundleArchiveManifest {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    throw bad('not valid JSON')
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad('not a JSON object')
  const m = raw as Record<string, unknown>
  if (m.kind !== KIND)
    throw bad(
      `kind is ${JSON.stringify(m.kind)}, expected "${KIND}" (a model archive goes to \`bundle models import\`)`,
    )
  if (m.formatVersion !== FORMAT_VERSION)
    throw bad(`format version ${JSON.stringify(m.formatVersion)} is not supported`)
  if (typeof m.name !== 'string' || typeof m.version !== 'string') throw bad('name and version must be strings')
  try {
    validateName(m.name)
    validateVersion(m.version, m.name)
  } catch (err) {
    throw bad((err as Error).message)
  }
  if (!isDigest(m.digest)) throw bad('digest must be sha256:<64 hex>')
  if (typeof m.created !== 'string' || Number.isNaN(Date.parse(m.created))) throw bad('created must be an ISO date')
  const parsed = parseFileList(m.files, bad)
  const files = parsed.files
  let total = parsed.total
  const inner = m.manifest as BundleArchiveManifest['manifest'] | undefined
  if (inner === null || typeof inner !== 'object' || Array.isArray(inner) || !Array.isArray(inner.models))
    throw bad('manifest must be an object with models')
  if (!Array.isArray(m.models)) throw bad('models must be an array')
  const models: ArchivedModel[] = m.models.map((x: unknown, i: number) => {
    const a = x as Record<string, unknown>
    if (
      a === null ||
      typeof a !== 'object' ||
      typeof a.tag !== 'string' ||
      !isDigest(a.digest) ||
      !isSha(a.sha256) ||
      !isSize(a.size) ||
      typeof a.entry !== 'string'
    )
      throw bad(`models[${i}] needs tag, digest, entry, sha256 and size`)
    parseExact(a.tag)
    if (
      !a.entry.startsWith(MODELS) ||
      !a.entry.endsWith('.bundlemodel') ||
      !isSafeModelPath(a.entry) ||
      a.entry.slice(MODELS.length).includes('/')
    )
      throw new BundleError(
        'E_ARCHIVE_UNSAFE_ENTRY',
        `models[${i}].entry ${JSON.stringify(a.entry)} is not models/<file>.bundlemodel`,
      )
    total += a.size
    return { tag: a.tag, digest: a.digest, entry: a.entry, sha256: a.sha256, size: a.size }
  })
  // The bundle's own pins and the archived models must be the same set.
  const pins = inner.models.map((p) => `${p.tag} ${p.digest}`).sort()
  if (JSON.stringify(pins) !== JSON.stringify(models.map((p) => `${p.tag} ${p.digest}`).sort()))
    throw bad('the archived models are not the models the bundle pins')
  if (new Set(models.map((x) => x.entry)).size !== models.length)
    throw new BundleError('E_ARCHIVE_UNSAFE_ENTRY', 'bundle archive lists one model entry twice')
  if (total > maxBytes)
    throw new BundleError(
      'E_ARCHIVE_TOO_LARGE',
      `archive declares ${total} bytes; the import limit is ${maxBytes} (BUNDLE_IMPORT_MAX_BYTES)`,
    )
  let labels: Record<string, string>
  try {
    labels = validateLabels(m.labels)
  } catch (err) {
    throw bad((err as Error).message)
  }
  if (text.length > MAX_MANIFEST_BYTES) throw bad('too large')
  return {
    kind: KIND,
    formatVersion: FORMAT_VERSION,
    name: m.name,
    version: m.version,
    digest: m.digest,
    labels,
    created: new Date(m.created).toISOString(),
    manifest: inner,
    files,
    models,
    ...withSignature(m.bundleSig),
  }
}

/** The archive manifest's bundleSig field, when there is one (checked: text, at most 256 KiB). */
function withSignature(sig: unknown): { bundleSig?: string } {
  if (sig === undefined) return {}
  if (typeof sig !== 'string' || sig.length > 256 * 1024)
    throw bad('bundleSig must be the text of a bundle signature (at most 256 KiB)')
  return { bundleSig: sig }
}

/**
 * Imports a `.bundle`: checks the whole archive first (readArchive), then imports each model
 * through the model archive import (deduplicated: a model already stored with the same digest
 * is kept), then commits the bundle. If anything fails, models this import added are removed
 * again and nothing of the bundle is stored.
 */
export async function importBundle(
  store: ModelStore,
  file: string,
): Promise<{ bundle: BundleInfo; status: 'imported' | 'already-present'; models: { tag: string; status: string }[] }> {
  const maxBytes = importLimit()
  const { manifest, staged } = await readArchive<BundleArchiveManifest>(store, file, {
    manifestName: MANIFEST,
    parse: (text) => parseBundleManifest(text, maxBytes),
    entries: (m) => [
      ...m.files.map((f) => ({ entry: FILES + f.path, size: f.size, sha256: f.sha256 })),
      ...m.models.map((x) => ({ entry: x.entry, size: x.size, sha256: x.sha256 })),
    ],
  })
  const added: string[] = []
  const models: { tag: string; status: string }[] = []
  const fileBlobs = manifest.files.map((f) => staged.get(FILES + f.path)!)
  try {
    if (modelDigest(manifest.files) !== manifest.digest)
      throw new BundleError(
        'E_ARCHIVE_CHECKSUM',
        `bundle digest ${manifest.digest} does not match its files (${modelDigest(manifest.files)})`,
      )
    for (const m of manifest.models) {
      const { model, status } = await store.import(staged.get(m.entry)!.tmpPath)
      if (status === 'imported') added.push(model.tag)
      if (model.tag !== m.tag || model.digest !== m.digest)
        throw new BundleError(
          'E_ARCHIVE_CHECKSUM',
          `${m.entry} holds ${model.tag} (${model.digest}), the bundle pins ${m.tag} (${m.digest})`,
        )
      models.push({ tag: model.tag, status })
    }
    const { bundle, status } = await store.bundles.commit(
      {
        name: manifest.name,
        version: manifest.version,
        digest: manifest.digest,
        size: manifest.files.reduce((n, f) => n + f.size, 0),
        labels: manifest.labels,
        manifest: manifest.manifest,
        files: manifest.files,
        createdAt: Date.parse(manifest.created),
      },
      fileBlobs,
      'same-digest-ok',
    )
    // A bundle already stored keeps the signature it has; one without gets the archive's.
    if (manifest.bundleSig !== undefined && (status === 'imported' || !storedBundleSignature(store, bundle.tag)))
      putBundleSignature(store, bundle.tag, manifest.bundleSig)
    return { bundle, status, models }
  } catch (err) {
    await store.blobs.discard(fileBlobs)
    // Only models this import added go; a model that was already stored stays.
    if (added.length) {
      try {
        store.delete(added)
      } catch {
        // best effort: a concurrent bundle may already reference it
      }
    }
    throw err
  } finally {
    await store.blobs.discard(manifest.models.map((m) => staged.get(m.entry)!))
  }
}
