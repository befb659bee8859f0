import { mkdirSync, readdirSync } from 'node:fs'
import { BlobStore, type StagedBlob } from './blobs.js'
import { BundleStore } from './bundle-store.js'
import { checkout, checkoutDir } from './checkout.js'
import { collectUnused } from './collect.js'
import { commitModel, type OnExisting } from './commit.js'
import { openIndex, translateSqliteError, type Db } from './db/open.js'
import { deleteModels, type DeleteOptions } from './delete.js'
import { ioError, tempName } from './fs-util.js'
import { defaultHome, layout, type StoreLayout } from './home.js'
import { exportModel } from './archive/export.js'
import { importModel, type ImportOptions } from './archive/import.js'
import { gcStore, verifyStore } from './maintenance.js'
import { ModelIndex, strip, type NewModel, type StoredModel } from './model-index.js'
import { resolveTag } from './resolve.js'
import { saveModel } from './save.js'
import { MODEL_NAMES, validateName } from './tag.js'
import type {
  ImportStatus,
  ListFilter,
  ModelInfo,
  ModelPaths,
  ModelSummary,
  ProgressFn,
  SaveInput,
  GcReport,
  VerifyReport,
  ModelFile,
} from './types.js'

// The class is the store's one entry point; what each operation does lives in a file of its own
// (save, commit, delete, collect, checkout, archive/, maintenance) that receives the store.
export type { DeleteOptions } from './delete.js'

export interface OpenOptions {
  /** Store directory; defaults to $BUNDLE_HOME or ~/.modelbundle. */
  home?: string
}

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
      for (const dir of [this.layout.home, this.layout.blobs, this.layout.tmp, this.layout.checkouts])
        mkdirSync(dir, { recursive: true })
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
    if (filter.name !== undefined) validateName(filter.name, MODEL_NAMES)
    return this.db.transaction(() => this.index.list(filter)).deferred()
  }

  /** Like list, without files, metadata and signatures: cheap enough for tables of 10k+ models. */
  summaries(filter: ListFilter = {}): ModelSummary[] {
    if (filter.name !== undefined) validateName(filter.name, MODEL_NAMES)
    return this.index.summaries(filter)
  }

  /**
   * Stores files as a new model version. Nothing is visible until every blob is durable. A
   * directory's model.sig becomes the version's signature unless `adoptSignature` is false.
   */
  save(input: SaveInput, options: { onProgress?: ProgressFn; adoptSignature?: boolean } = {}): Promise<ModelInfo> {
    return saveModel(this, input, options)
  }

  /** @internal Places staged blobs and inserts the model, shared by save and import. */
  commit(
    model: NewModel,
    staged: readonly StagedBlob[],
    onExisting: OnExisting,
    signature?: string,
  ): Promise<{ info: ModelInfo; status: ImportStatus }> {
    return commitModel(this, model, staged, onExisting, signature)
  }

  /** @internal Removes blobs (and checkouts) nobody references or leases. */
  collect(blobs: Iterable<string>, digests: Iterable<string> = []): { blobs: number; bytes: number } {
    return collectUnused(this, blobs, digests)
  }

  /** Deletes models; refuses (deleting nothing) if any is referenced by a bundle, unless `force`. */
  delete(tags: readonly string[], options: DeleteOptions = {}): ModelInfo[] {
    return deleteModels(this, tags, options)
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
    return checkoutDir(this, digest)
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

  /** @internal A directory keyed by `digest` holding `files`, hard-linked to the blobs; made once and reused. */
  checkout(
    label: string,
    digest: string,
    list: readonly ModelFile[],
  ): Promise<{ dir: string; files: Record<string, string> }> {
    return checkout(this, label, digest, list)
  }

  /** Writes a `.bundlemodel` archive (default `./<name>-<version>.bundlemodel`). */
  export(
    tag: string,
    out?: string,
    options: { onProgress?: ProgressFn } = {},
  ): Promise<{ path: string; model: ModelInfo }> {
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
