import { randomUUID } from 'node:crypto'
import { existsSync, linkSync, copyFileSync, mkdirSync, readdirSync, renameSync, statSync, unlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { BundleError } from '../errors/index.js'
import { BlobStore, type StagedBlob } from './blobs.js'
import { BundleStore } from './bundle-store.js'
import { openIndex, translateSqliteError, type Db } from './db/open.js'
import { modelDigest } from './digest.js'
import { HOST, ioError, removeQuietly, tempName } from './fs-util.js'
import { defaultHome, layout, type StoreLayout } from './home.js'
import { collectInputs } from './inputs.js'
import { validateLabels, validateMetadata } from './labels.js'
import { exportModel } from './archive/export.js'
import { importModel, type ImportOptions } from './archive/import.js'
import { gcStore, verifyStore } from './maintenance.js'
import { ModelIndex, type NewModel, type StoredModel } from './model-index.js'
import { readOnnxSignature } from './onnx-signature.js'
import { resolveTag } from './resolve.js'
import { formatTag, parseTag, validateName, validateVersion } from './tag.js'
import { FRAMEWORKS, type Framework, type ImportStatus, type ListFilter, type ModelInfo, type ModelPaths, type ModelSummary, type ProgressFn, type SaveInput, type Signatures, type GcReport, type VerifyReport, type ModelFile } from './types.js'
import { generateVersion } from './version-id.js'

export interface OpenOptions {
  /** Store directory; defaults to $BUNDLE_HOME or ~/.modelbundle. */
  home?: string
}

export interface DeleteOptions {
  /** Delete even when a stored bundle references the model. */
  force?: boolean
  /** Treat each tag as a name and delete every version of it. */
  allVersions?: boolean
}

/** How a commit treats an existing model under the same tag. */
type OnExisting = 'fail' | 'same-digest-ok' | 'replace'

const strip = ({ id: _id, ...info }: StoredModel): ModelInfo => info

/**
 * The local model store: a SQLite index plus content-addressed blobs under one directory.
 *
 * @example
 * const store = ModelStore.open()
 * const m = await store.save({ name: 'ocr-cls', paths: ['cls.onnx'], labels: { stage: 'dev' } })
 * const { files } = await store.paths('ocr-cls:latest')
 */
export class ModelStore {
  readonly layout: StoreLayout
  /** @internal used by archives and maintenance */
  readonly index: ModelIndex
  /** @internal the SQLite handle, for the bundle index */
  readonly db: Db
  /** @internal */
  readonly blobs: BlobStore

  private constructor(home: string) {
    this.layout = layout(home)
    try {
      for (const dir of [this.layout.home, this.layout.blobs, this.layout.tmp, this.layout.checkouts]) mkdirSync(dir, { recursive: true })
    } catch (err) {
      throw ioError(err, `creating the store at ${this.layout.home}`)
    }
    this.db = openIndex(this.layout.index)
    this.index = new ModelIndex(this.db)
    this.blobs = new BlobStore(this.layout.blobs, this.layout.tmp)
  }

  static open(options: OpenOptions = {}): ModelStore {
    return new ModelStore(options.home ?? defaultHome())
  }

  get home(): string {
    return this.layout.home
  }

  private bundleStore: BundleStore | undefined

  /** Bundles, kept in the same index and blobs as the models they reference. */
  get bundles(): BundleStore {
    return (this.bundleStore ??= new BundleStore(this))
  }

  close(): void {
    if (this.db.open) this.db.close()
  }

  /** @internal Runs `fn` in a write transaction taken up front, so concurrent writers queue instead of deadlocking. */
  write<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn).immediate()
    } catch (err) {
      throw translateSqliteError(err)
    }
  }

  /** Resolves a tag (`name`, `name:latest`, `name:version-or-prefix`, `name@range`) to one model. */
  get(tag: string): ModelInfo {
    return strip(this.resolve(tag))
  }

  /** @internal like get, with the row id */
  resolve(tag: string): StoredModel {
    try {
      // One read transaction: the model row and its file list come from the same snapshot.
      return this.db.transaction(() => resolveTag(this.index, tag)).deferred()
    } catch (err) {
      throw translateSqliteError(err)
    }
  }

  list(filter: ListFilter = {}): ModelInfo[] {
    if (filter.name !== undefined) validateName(filter.name)
    return this.db.transaction(() => this.index.list(filter)).deferred()
  }

  /** Like list, without files, metadata and signatures: cheap enough for tables of 10k+ models. */
  summaries(filter: ListFilter = {}): ModelSummary[] {
    if (filter.name !== undefined) validateName(filter.name)
    return this.index.summaries(filter)
  }

  /** Stores files as a new model version. Nothing is visible until every blob is durable. */
  async save(input: SaveInput, options: { onProgress?: ProgressFn } = {}): Promise<ModelInfo> {
    const name = validateName(input.name)
    const createdAt = Date.now()
    const version = input.version === undefined ? generateVersion(createdAt) : validateVersion(input.version, name)
    const labels = validateLabels(input.labels)
    const metadata = validateMetadata(input.metadata)
    const files = collectInputs(input.paths)
    const framework = pickFramework(input.framework, files.map((f) => f.path))
    if (this.index.exact(name, version) !== undefined) {
      throw new BundleError('E_STORE_TAG_EXISTS', `${formatTag(name, version)} already exists; choose another --version or delete it first`)
    }
    // Signatures first: a broken .onnx fails before a single byte is written to the store.
    const signatures: Signatures = {}
    if (framework === 'onnx') {
      for (const f of files) if (f.path.endsWith('.onnx')) signatures[f.path] = await readOnnxSignature(f.source, f.path)
    }
    const total = files.reduce((n, f) => n + f.size, 0)
    let done = 0
    const staged: StagedBlob[] = []
    try {
      for (const f of files) {
        options.onProgress?.({ phase: 'hash', done, total, file: f.path })
        staged.push(
          await this.blobs.stageFile(f.source, (n) => {
            done += n
            options.onProgress?.({ phase: 'hash', done, total, file: f.path })
          }),
        )
      }
    } catch (err) {
      await this.blobs.discard(staged)
      throw err
    }
    const modelFiles = files.map((f, i) => ({ path: f.path, sha256: staged[i]!.sha256, size: staged[i]!.size }))
    const model: NewModel = {
      name,
      version,
      framework,
      digest: modelDigest(modelFiles),
      size: modelFiles.reduce((n, f) => n + f.size, 0),
      labels,
      metadata,
      signatures,
      files: modelFiles,
      createdAt,
    }
    const { info } = await this.commit(model, staged, 'fail')
    return info
  }

  /**
   * @internal Places staged blobs and inserts the model, shared by save and import.
   * Order: lease digests → place blobs (fsynced) → insert row and drop lease in one transaction.
   */
  async commit(model: NewModel, staged: readonly StagedBlob[], onExisting: OnExisting): Promise<{ info: ModelInfo; status: ImportStatus }> {
    const owner = randomUUID()
    const garbage = new Set<string>()
    const oldDigests: string[] = []
    try {
      const now = Date.now()
      this.write(() => {
        for (const s of staged) this.index.lease(s.sha256, owner, HOST, process.pid, now)
      })
      for (const s of staged) this.blobs.place(s)
      return this.write(() => {
        const existing = this.index.exact(model.name, model.version)
        let status: ImportStatus = 'imported'
        if (existing !== undefined) {
          // Same content is never "replaced": that would only churn ids and drop references.
          if (onExisting !== 'fail' && existing.digest === model.digest) return { info: strip(existing), status: 'already-present' as const }
          if (onExisting !== 'replace') {
            throw new BundleError('E_STORE_TAG_EXISTS', `${existing.tag} already exists with different content (${existing.digest}); ${onExisting === 'fail' ? 'choose another --version or delete it first' : 'pass --force to replace it'}`)
          }
          const refs = this.index.refs(existing.id)
          if (refs.length > 0) {
            throw new BundleError('E_STORE_MODEL_REFERENCED', `refusing to replace ${existing.tag}: used by ${refs.map((r) => `${r.kind} ${r.ref}`).join(', ')}; import it under another version or delete those first`)
          }
          this.index.remove(existing.id)
          for (const f of existing.files) garbage.add(f.sha256)
          oldDigests.push(existing.digest)
          status = 'replaced'
        }
        const id = this.index.insert(model)
        this.index.dropLeases(owner)
        return { info: strip(this.index.byId(id)!), status }
      })
    } finally {
      // Staged digests are only candidates: collect keeps every blob a committed row uses.
      for (const s of staged) garbage.add(s.sha256)
      await this.blobs.discard(staged) // no-op for placed blobs: their temp names are gone
      try {
        this.write(() => this.index.dropLeases(owner))
        this.collect(garbage, oldDigests)
      } catch {
        // Leftovers are reclaimed by `gc`; never mask the original outcome.
      }
    }
  }

  /**
   * @internal Removes blobs (and checkouts) nobody references or leases. Runs inside a write
   * transaction so a writer cannot lease a digest between the check and the unlink.
   */
  collect(blobs: Iterable<string>, digests: Iterable<string> = []): { blobs: number; bytes: number } {
    const candidates = [...new Set(blobs)]
    const modelDigests = [...new Set(digests)]
    if (candidates.length === 0 && modelDigests.length === 0) return { blobs: 0, bytes: 0 }
    return this.write(() => {
      let n = 0
      let bytes = 0
      for (const sha of candidates) {
        if (this.index.isBlobInUse(sha)) continue
        const file = this.blobs.path(sha)
        try {
          bytes += statSync(file).size
          unlinkSync(file)
          n++
        } catch {
          // already gone
        }
      }
      for (const d of modelDigests) if (!this.index.isDigestInUse(d)) void removeQuietly(this.checkoutDir(d))
      return { blobs: n, bytes }
    })
  }

  /** Deletes models; refuses (deleting nothing) if any is referenced by a bundle, unless `force`. */
  delete(tags: readonly string[], options: DeleteOptions = {}): ModelInfo[] {
    if (tags.length === 0) throw new BundleError('E_STORE_TAG_INVALID', 'no tag given to delete')
    for (const t of tags) parseTag(t) // every tag is checked before anything is deleted
    const deleted = this.write(() => {
      const targets = new Map<number, StoredModel>()
      for (const tag of tags) {
        if (options.allVersions) {
          const q = parseTag(tag)
          const all = this.index.versions(q.name)
          if (all.length === 0) throw new BundleError('E_STORE_MODEL_NOT_FOUND', `no model named "${q.name}" is stored`)
          for (const v of all) targets.set(v.id, this.index.byId(v.id)!)
        } else {
          const m = resolveTag(this.index, tag)
          targets.set(m.id, m)
        }
      }
      if (!options.force) {
        const used = [...targets.values()].flatMap((m) => this.index.refs(m.id).map((r) => `${m.tag} (used by ${r.kind} ${r.ref})`))
        if (used.length) throw new BundleError('E_STORE_MODEL_REFERENCED', `refusing to delete: ${used.join(', ')}; delete those first or pass --force`, { details: { references: used } })
      }
      for (const m of targets.values()) this.index.remove(m.id)
      return [...targets.values()]
    })
    try {
      this.collect(
        deleted.flatMap((m) => m.files.map((f) => f.sha256)),
        deleted.map((m) => m.digest),
      )
    } catch {
      // the delete committed; blobs left behind are reclaimed by `gc`
    }
    return deleted.map(strip)
  }

  /** Records that something (e.g. a bundle) depends on a model; `delete` then needs --force. */
  addReference(tag: string, kind: string, ref: string): ModelInfo {
    return this.write(() => {
      const m = resolveTag(this.index, tag)
      this.index.addRef(m.id, kind, ref)
      return strip(m)
    })
  }

  removeReference(tag: string, kind: string, ref: string): void {
    this.write(() => this.index.removeRef(resolveTag(this.index, tag).id, kind, ref))
  }

  references(tag: string): { kind: string; ref: string }[] {
    return this.index.refs(this.resolve(tag).id)
  }

  /** @internal */
  checkoutDir(digest: string): string {
    return join(this.layout.checkouts, digest.replace(/^sha256:/, ''))
  }

  /**
   * Local paths of a model's files, for runners: a directory keyed by the model digest in
   * which every file has its own name (hard links to the read-only blobs, so no copy).
   */
  async paths(tag: string): Promise<ModelPaths> {
    const model = this.get(tag)
    const { dir, files } = await this.checkout(model.tag, model.digest, model.files)
    return { model, dir, files }
  }

  /**
   * @internal A directory keyed by `digest` holding `files` under their own paths, hard-linked
   * to the blobs; made once (atomically, by rename) and reused. Models and bundles use it.
   */
  async checkout(label: string, digest: string, list: readonly ModelFile[]): Promise<{ dir: string; files: Record<string, string> }> {
    const dir = this.checkoutDir(digest)
    const files = Object.fromEntries(list.map((f) => [f.path, join(dir, f.path)]))
    const complete = (): boolean =>
      list.every((f) => {
        try {
          return statSync(join(dir, f.path)).size === f.size
        } catch {
          return false
        }
      })
    if (existsSync(dir) && complete()) return { dir, files }
    for (const f of list) {
      if (!this.blobs.has(f.sha256)) throw new BundleError('E_STORE_CORRUPT', `${label}: file ${f.path} (blob ${f.sha256.slice(0, 12)}) is missing from the store`)
    }
    const staging = tempName(this.layout.tmp, 'checkout')
    try {
      for (const f of list) {
        const dest = join(staging, f.path)
        mkdirSync(dirname(dest), { recursive: true })
        try {
          linkSync(this.blobs.path(f.sha256), dest)
        } catch {
          copyFileSync(this.blobs.path(f.sha256), dest) // file systems without hard links
        }
      }
      if (existsSync(dir) && !complete()) {
        // An incomplete checkout left by a crash: move it aside first, so a checkout another
        // process completes meanwhile is never the one removed.
        const aside = tempName(this.layout.tmp, 'stale')
        try {
          renameSync(dir, aside)
        } catch {
          // someone else moved or completed it
        }
        await removeQuietly(aside)
      }
      try {
        renameSync(staging, dir)
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (!(code === 'ENOTEMPTY' || code === 'EEXIST') || !complete()) throw err
        // another process materialized it first
      }
    } catch (err) {
      throw ioError(err, `preparing files of ${label}`)
    } finally {
      await removeQuietly(staging)
    }
    return { dir, files }
  }

  /** Writes a `.bundlemodel` archive (default `./<name>-<version>.bundlemodel`). */
  export(tag: string, out?: string, options: { onProgress?: ProgressFn } = {}): Promise<{ path: string; model: ModelInfo }> {
    return exportModel(this, tag, out, options)
  }

  /** Imports a `.bundlemodel` archive; importing the same model twice reports `already-present`. */
  import(file: string, options: ImportOptions = {}): Promise<{ model: ModelInfo; status: ImportStatus }> {
    return importModel(this, file, options)
  }

  /** Re-hashes every referenced blob; see VerifyReport. */
  verify(): Promise<VerifyReport> {
    return verifyStore(this)
  }

  /** Reclaims unreferenced blobs, stale temp files and leases of crashed writers. */
  gc(): Promise<GcReport> {
    return gcStore(this)
  }

  /**
   * A fresh directory in the store's temp area, named after this process so that a crash leaves
   * something `verify` counts and `gc` removes (build staging, image contexts).
   */
  makeTempDir(suffix: string): string {
    const dir = tempName(this.layout.tmp, suffix)
    mkdirSync(dir, { recursive: true })
    return dir
  }

  /** @internal temp entries (for gc) */
  tempEntries(): string[] {
    try {
      return readdirSync(this.layout.tmp)
    } catch {
      return []
    }
  }
}

function pickFramework(requested: Framework | undefined, paths: string[]): Framework {
  const hasOnnx = paths.some((p) => p.endsWith('.onnx'))
  if (requested === undefined) return hasOnnx ? 'onnx' : 'custom'
  if (!FRAMEWORKS.includes(requested)) throw new BundleError('E_STORE_FRAMEWORK_INVALID', `unknown framework "${requested}"; use ${FRAMEWORKS.join(' or ')}`)
  if (requested === 'onnx' && !hasOnnx) throw new BundleError('E_STORE_FRAMEWORK_INVALID', 'framework onnx needs at least one .onnx file among the saved files')
  return requested
}
