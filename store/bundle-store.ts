import { randomUUID } from 'node:crypto'
import { BundleError } from '../errors/index.js'
import type { StagedBlob } from './blobs.js'
import { exportBundle, importBundle } from './archive/bundle-archive.js'
import { BundleIndex, type NewBundle, type StoredBundle } from './bundle-index.js'
import { translateSqliteError } from './db/open.js'
import { modelDigest } from './digest.js'
import { HOST } from './fs-util.js'
import { collectInputs } from './inputs.js'
import { validateLabels, type Labels } from './labels.js'
import type { ModelStore } from './model-store.js'
import { resolveIn, resolveMany, resolveTag, type Kind } from './resolve.js'
import { BUNDLE_NAMES, formatTag, parseTag, validateName, validateVersion } from './tag.js'
import type { BundleInfo, BundleModelRef } from './types.js'
import { generateVersion } from './version-id.js'

const BUNDLE: Kind = { noun: 'bundle', notFound: 'E_BUNDLE_NOT_FOUND', names: BUNDLE_NAMES }

export interface SaveBundleInput {
  name: string
  /** Default: a generated, sortable version — or the existing one when the same content is already stored. */
  version?: string
  labels?: Labels
  /** The built directory: every file in it becomes part of the bundle. */
  dir: string
  /** Stored as is (the bundle's own description); `models` in it are pinned and referenced. */
  manifest: Record<string, unknown> & { models: BundleModelRef[] }
}

const strip = ({ id: _id, ...info }: StoredBundle): BundleInfo => info

/**
 * Bundles in the model store's index and blobs: files are content-addressed (a file shared by
 * two bundle versions is stored once), models are referenced by exact tag and digest (never
 * copied), and a referenced model cannot be deleted without --force.
 */
export class BundleStore {
  /** @internal the bundle rows (SQLite): not part of the published types */
  readonly index: BundleIndex

  constructor(private readonly store: ModelStore) {
    this.index = new BundleIndex(store.db)
  }

  get(tag: string): BundleInfo {
    return strip(this.resolve(tag))
  }

  /** @internal the stored row, id included (archives and paths use it) */
  resolve(tag: string): StoredBundle {
    try {
      return this.store.db.transaction(() => resolveIn(this.index, tag, BUNDLE)).deferred()
    } catch (err) {
      throw translateSqliteError(err)
    }
  }

  list(name?: string): Omit<BundleInfo, 'files'>[] {
    if (name !== undefined) validateName(name)
    return this.index.list(name)
  }

  /**
   * Stores a built directory as `name:version`. The same content under the same name with no
   * version asked for is not stored twice: the existing bundle comes back with status 'unchanged'.
   */
  async save(input: SaveBundleInput): Promise<{ bundle: BundleInfo; status: 'created' | 'unchanged' }> {
    const name = validateName(input.name)
    const labels = validateLabels(input.labels)
    const createdAt = Date.now()
    const version = input.version === undefined ? undefined : validateVersion(input.version, name)
    const inputs = collectInputs([input.dir])
    const staged: StagedBlob[] = []
    try {
      for (const f of inputs) staged.push(await this.store.blobs.stageFile(f.source))
    } catch (err) {
      await this.store.blobs.discard(staged)
      throw err
    }
    const files = inputs.map((f, i) => ({ path: f.path, sha256: staged[i]!.sha256, size: staged[i]!.size }))
    const digest = modelDigest(files)
    if (version === undefined) {
      const same = this.index.withDigest(name, digest)
      if (same !== undefined) {
        await this.store.blobs.discard(staged)
        return { bundle: strip(same), status: 'unchanged' }
      }
    }
    const { bundle } = await this.commit(
      {
        name,
        version: version ?? generateVersion(createdAt),
        digest,
        size: files.reduce((n, f) => n + f.size, 0),
        labels,
        manifest: input.manifest,
        files,
        createdAt,
      },
      staged,
      'fail',
    )
    return { bundle, status: 'created' }
  }

  /**
   * @internal Places staged blobs and inserts the bundle with its model references (save and
   * import). Order: lease → place (fsynced) → insert, pin and drop the lease in one transaction.
   */
  async commit(
    b: NewBundle & { manifest: { models: BundleModelRef[] } },
    staged: readonly StagedBlob[],
    onExisting: 'fail' | 'same-digest-ok',
  ): Promise<{ bundle: BundleInfo; status: 'imported' | 'already-present' }> {
    const owner = randomUUID()
    try {
      const now = Date.now()
      this.store.write(() => {
        for (const s of staged) this.store.index.lease(s.sha256, owner, HOST, process.pid, now)
      })
      for (const s of staged) this.store.blobs.place(s)
      return this.store.write(() => {
        const tag = formatTag(b.name, b.version)
        const existing = this.index.exact(b.name, b.version)
        if (existing !== undefined) {
          if (onExisting === 'same-digest-ok' && existing.digest === b.digest)
            return { bundle: strip(existing), status: 'already-present' as const }
          throw new BundleError(
            'E_BUNDLE_EXISTS',
            `${tag} already exists${
              existing.digest === b.digest ? '' : ` with different content (${existing.digest})`
            }; choose another --version or delete it first`,
          )
        }
        // Pin and reference every model in the same transaction: a model deleted meanwhile fails the commit.
        for (const ref of b.manifest.models) {
          const m = resolveTag(this.store.index, ref.tag)
          if (m.digest !== ref.digest)
            throw new BundleError(
              'E_BUNDLE_MODEL_MISMATCH',
              `model ${ref.tag} in the store (${m.digest}) is not the one the bundle pins (${ref.digest})`,
            )
          this.store.index.addRef(m.id, 'bundle', tag)
        }
        const id = this.index.insert(b)
        this.store.index.dropLeases(owner)
        return { bundle: strip(this.index.byId(id)!), status: 'imported' as const }
      })
    } finally {
      await this.store.blobs.discard(staged)
      try {
        this.store.write(() => this.store.index.dropLeases(owner))
        this.store.collect(staged.map((s) => s.sha256))
      } catch {
        // leftovers are reclaimed by `gc`
      }
    }
  }

  /** Deletes bundles (all tags checked first; nothing is deleted if one is unknown) and releases their models. */
  delete(tags: readonly string[], options: { allVersions?: boolean } = {}): BundleInfo[] {
    if (tags.length === 0) throw new BundleError('E_STORE_TAG_INVALID', 'no tag given to delete')
    for (const t of tags) parseTag(t)
    const deleted = this.store.write(() => {
      const targets = resolveMany(this.index, tags, BUNDLE, options.allVersions)
      for (const b of targets) {
        this.store.index.removeRefsTo('bundle', b.tag)
        this.index.remove(b.id)
      }
      return targets
    })
    try {
      this.store.collect(
        deleted.flatMap((b) => b.files.map((f) => f.sha256)),
        deleted.map((b) => b.digest),
      )
    } catch {
      // the delete committed; blobs left behind are reclaimed by `gc`
    }
    return deleted.map(strip)
  }

  /** Writes a `.bundle` archive holding the bundle and every model it pins (default `./<name>-<version>.bundle`). */
  export(tag: string, out?: string): Promise<{ path: string; bundle: BundleInfo }> {
    return exportBundle(this.store, tag, out)
  }

  /** Imports a `.bundle`: its models go to the model store (deduplicated), then the bundle; all or nothing. */
  import(file: string): Promise<{
    bundle: BundleInfo
    status: 'imported' | 'already-present'
    models: { tag: string; status: string }[]
  }> {
    return importBundle(this.store, file)
  }

  /** The bundle's files as a directory (hard links to the blobs, made once per digest). */
  async paths(tag: string): Promise<{ bundle: BundleInfo; dir: string }> {
    const bundle = this.get(tag)
    const { dir } = await this.store.checkout(`bundle ${bundle.tag}`, bundle.digest, bundle.files)
    return { bundle, dir }
  }
}
