import type { Statement } from 'better-sqlite3'
import type { Db } from './db/open.js'
import { formatTag } from './tag.js'
import type { BundleInfo, BundleModelRef, ModelFile } from './types.js'

interface BundleRow {
  id: number
  name: string
  version: string
  digest: string
  size: number
  labels: string
  manifest: string
  created_at: number
}

export interface StoredBundle extends BundleInfo {
  id: number
}

export interface NewBundle {
  name: string
  version: string
  digest: string
  size: number
  labels: Record<string, string>
  manifest: Record<string, unknown> & { models?: BundleModelRef[] }
  files: ModelFile[]
  createdAt: number
}

const COLUMNS = 'id, name, version, digest, size, labels, manifest, created_at'

/** All SQL of the bundle index (the same database as the models). */
export class BundleIndex {
  private readonly q: Record<string, Statement>

  constructor(readonly db: Db) {
    const p = (sql: string) => db.prepare(sql)
    this.q = {
      exact: p(`SELECT ${COLUMNS} FROM bundles WHERE name = ? AND version = ?`),
      latest: p(`SELECT ${COLUMNS} FROM bundles WHERE name = ? ORDER BY created_at DESC, id DESC LIMIT 1`),
      prefix: p(
        `SELECT ${COLUMNS} FROM bundles WHERE name = ? AND substr(version, 1, ?) = ? ORDER BY created_at DESC, id ` +
          `DESC LIMIT 21`,
      ),
      versions: p(`SELECT id, version FROM bundles WHERE name = ?`),
      byId: p(`SELECT ${COLUMNS} FROM bundles WHERE id = ?`),
      byDigest: p(
        `SELECT ${COLUMNS} FROM bundles WHERE name = ? AND digest = ? ORDER BY created_at DESC, id DESC LIMIT 1`,
      ),
      filesOf: p('SELECT path, blob, size FROM bundle_files WHERE bundle_id = ? ORDER BY path'),
      insert: p(
        `INSERT INTO bundles (name, version, digest, size, labels, manifest, created_at) VALUES (@name, @version, ` +
          `@digest, @size, @labels, @manifest, @createdAt)`,
      ),
      insertFile: p('INSERT INTO bundle_files (bundle_id, path, blob, size) VALUES (?, ?, ?, ?)'),
      remove: p('DELETE FROM bundles WHERE id = ?'),
      all: p(`SELECT ${COLUMNS} FROM bundles ORDER BY name, created_at DESC, id DESC`),
      named: p(`SELECT ${COLUMNS} FROM bundles WHERE name = ? ORDER BY created_at DESC, id DESC`),
    }
  }

  private withFiles(row: BundleRow | undefined): StoredBundle | undefined {
    if (row === undefined) return undefined
    const files = (this.q.filesOf!.all(row.id) as { path: string; blob: string; size: number }[]).map((f) => ({
      path: f.path,
      sha256: f.blob,
      size: f.size,
    }))
    return { id: row.id, ...toInfo(row), files }
  }

  exact(name: string, version: string): StoredBundle | undefined {
    return this.withFiles(this.q.exact!.get(name, version) as BundleRow | undefined)
  }

  latest(name: string): StoredBundle | undefined {
    return this.withFiles(this.q.latest!.get(name) as BundleRow | undefined)
  }

  byId(id: number): StoredBundle | undefined {
    return this.withFiles(this.q.byId!.get(id) as BundleRow | undefined)
  }

  /** The newest bundle of `name` with exactly this content, if any. */
  withDigest(name: string, digest: string): StoredBundle | undefined {
    return this.withFiles(this.q.byDigest!.get(name, digest) as BundleRow | undefined)
  }

  prefixed(name: string, prefix: string): { id: number; version: string }[] {
    return (this.q.prefix!.all(name, prefix.length, prefix) as BundleRow[]).map((r) => ({
      id: r.id,
      version: r.version,
    }))
  }

  versions(name: string): { id: number; version: string }[] {
    return this.q.versions!.all(name) as { id: number; version: string }[]
  }

  /** Newest first within a name; without files (a listing never needs them). */
  list(name?: string): Omit<BundleInfo, 'files'>[] {
    const rows = (name === undefined ? this.q.all!.all() : this.q.named!.all(name)) as BundleRow[]
    return rows.map(toInfo)
  }

  insert(b: NewBundle): number {
    const { lastInsertRowid } = this.q.insert!.run({
      name: b.name,
      version: b.version,
      digest: b.digest,
      size: b.size,
      labels: JSON.stringify(b.labels),
      manifest: JSON.stringify(b.manifest),
      createdAt: b.createdAt,
    })
    const id = Number(lastInsertRowid)
    for (const f of b.files) this.q.insertFile!.run(id, f.path, f.sha256, f.size)
    return id
  }

  remove(id: number): void {
    this.q.remove!.run(id)
  }
}

function toInfo(row: BundleRow): Omit<BundleInfo, 'files'> {
  const manifest = JSON.parse(row.manifest) as Record<string, unknown> & { models?: BundleModelRef[] }
  return {
    tag: formatTag(row.name, row.version),
    name: row.name,
    version: row.version,
    digest: row.digest,
    size: row.size,
    models: manifest.models ?? [],
    labels: JSON.parse(row.labels) as Record<string, string>,
    created: new Date(row.created_at).toISOString(),
    manifest,
  }
}
