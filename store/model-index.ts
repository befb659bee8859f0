import type { Statement } from 'better-sqlite3'
import type { Db } from './db/open.js'
import { formatTag } from './tag.js'
import type { Framework, ListFilter, ModelFile, ModelInfo, ModelSummary } from './types.js'

interface ModelRow {
  id: number
  name: string
  version: string
  framework: Framework
  digest: string
  size: number
  labels: string
  metadata: string
  signatures: string
  created_at: number
}

interface FileRow {
  model_id: number
  path: string
  blob: string
  size: number
}

export interface StoredModel extends ModelInfo {
  id: number
}

/** The row id stays inside the store: callers name models by tag. */
export const strip = ({ id: _id, ...info }: StoredModel): ModelInfo => info

export interface NewModel {
  name: string
  version: string
  framework: Framework
  digest: string
  size: number
  labels: Record<string, string>
  metadata: Record<string, unknown>
  signatures: ModelInfo['signatures']
  files: ModelFile[]
  createdAt: number
}

// Most models have no labels, metadata or signatures: skip the parser for the empty object.
const parseObject = (text: string): Record<string, unknown> =>
  text === '{}' ? {} : (JSON.parse(text) as Record<string, unknown>)

const COLUMNS = 'id, name, version, framework, digest, size, labels, metadata, signatures, created_at'

/** All SQL of the model index, as prepared statements; no file I/O happens here. */
export class ModelIndex {
  private readonly q: Record<string, Statement>

  constructor(readonly db: Db) {
    const p = (sql: string) => db.prepare(sql)
    this.q = {
      exact: p(`SELECT ${COLUMNS} FROM models WHERE name = ? AND version = ?`),
      latest: p(`SELECT ${COLUMNS} FROM models WHERE name = ? ORDER BY created_at DESC, id DESC LIMIT 1`),
      // substr, not LIKE: "_" and "%" are legal in versions and would be wildcards.
      prefix: p(
        `SELECT ${COLUMNS} FROM models WHERE name = ? AND substr(version, 1, ?) = ? ORDER BY created_at DESC, id ` +
          `DESC LIMIT 21`,
      ),
      versions: p(`SELECT ${COLUMNS} FROM models WHERE name = ?`),
      byId: p(`SELECT ${COLUMNS} FROM models WHERE id = ?`),
      filesOf: p('SELECT model_id, path, blob, size FROM model_files WHERE model_id = ? ORDER BY path'),
      allFiles: p('SELECT model_id, path, blob, size FROM model_files ORDER BY model_id, path'),
      insertModel: p(
        `INSERT INTO models (name, version, framework, digest, size, labels, metadata, signatures, created_at)
                      VALUES (@name, @version, @framework, @digest, @size, ` +
          `@labels, @metadata, @signatures, @createdAt)`,
      ),
      insertFile: p('INSERT INTO model_files (model_id, path, blob, size) VALUES (?, ?, ?, ?)'),
      insertLabel: p('INSERT INTO model_labels (model_id, key, value) VALUES (?, ?, ?)'),
      deleteModel: p('DELETE FROM models WHERE id = ?'),
      refsOf: p('SELECT kind, ref FROM model_refs WHERE model_id = ? ORDER BY kind, ref'),
      addRef: p('INSERT OR IGNORE INTO model_refs (model_id, kind, ref) VALUES (?, ?, ?)'),
      removeRef: p('DELETE FROM model_refs WHERE model_id = ? AND kind = ? AND ref = ?'),
      removeRefsTo: p('DELETE FROM model_refs WHERE kind = ? AND ref = ?'),
      // Bundles share the blobs: a blob is in use while a model or a bundle holds it.
      blobReferenced: p(
        'SELECT 1 FROM model_files WHERE blob = ? UNION ALL SELECT 1 FROM bundle_files WHERE blob = ? LIMIT 1',
      ),
      blobLeased: p('SELECT 1 FROM blob_leases WHERE blob = ? LIMIT 1'),
      addLease: p('INSERT OR IGNORE INTO blob_leases (blob, owner, host, pid, created_at) VALUES (?, ?, ?, ?, ?)'),
      dropLeases: p('DELETE FROM blob_leases WHERE owner = ?'),
      allLeases: p('SELECT blob, owner, host, pid, created_at FROM blob_leases'),
      allBlobs: p(
        'SELECT blob, MAX(size) AS size FROM (SELECT blob, size FROM model_files UNION ALL SELECT blob, size FROM ' +
          'bundle_files) GROUP BY blob',
      ),
      digestInUse: p('SELECT 1 FROM models WHERE digest = ? UNION ALL SELECT 1 FROM bundles WHERE digest = ? LIMIT 1'),
      count: p('SELECT COUNT(*) AS n FROM models'),
      modelsWithBlob: p(
        "SELECT DISTINCT m.name || ':' || m.version AS tag FROM model_files f JOIN models m ON m.id = f.model_id " +
          "WHERE f.blob = ? UNION SELECT 'bundle ' || b.name || ':' || b.version FROM bundle_files f JOIN bundles " +
          'b ON b.id = f.bundle_id WHERE f.blob = ? ORDER BY tag',
      ),
    }
  }

  private toInfo(row: ModelRow, files: ModelFile[]): StoredModel {
    return { id: row.id, ...this.toPublic(row, files) }
  }

  private toPublic(row: ModelRow, files: ModelFile[]): ModelInfo {
    return {
      tag: formatTag(row.name, row.version),
      name: row.name,
      version: row.version,
      framework: row.framework,
      digest: row.digest,
      size: row.size,
      labels: parseObject(row.labels) as Record<string, string>,
      metadata: parseObject(row.metadata),
      signatures: parseObject(row.signatures) as ModelInfo['signatures'],
      files,
      created: new Date(row.created_at).toISOString(),
    }
  }

  private withFiles(row: ModelRow | undefined): StoredModel | undefined {
    if (row === undefined) return undefined
    const files = (this.q.filesOf!.all(row.id) as FileRow[]).map((f) => ({
      path: f.path,
      sha256: f.blob,
      size: f.size,
    }))
    return this.toInfo(row, files)
  }

  exact(name: string, version: string): StoredModel | undefined {
    return this.withFiles(this.q.exact!.get(name, version) as ModelRow | undefined)
  }

  latest(name: string): StoredModel | undefined {
    return this.withFiles(this.q.latest!.get(name) as ModelRow | undefined)
  }

  byId(id: number): StoredModel | undefined {
    return this.withFiles(this.q.byId!.get(id) as ModelRow | undefined)
  }

  /** Versions of `name` starting with `prefix`, newest first (at most 21: enough to show ambiguity). */
  prefixed(name: string, prefix: string): { id: number; version: string }[] {
    return (this.q.prefix!.all(name, prefix.length, prefix) as ModelRow[]).map((r) => ({
      id: r.id,
      version: r.version,
    }))
  }

  versions(name: string): { id: number; version: string }[] {
    return (this.q.versions!.all(name) as ModelRow[]).map((r) => ({ id: r.id, version: r.version }))
  }

  /** Only the columns a table shows: no files, metadata or signatures (5× less work at 10k models). */
  summaries(filter: ListFilter = {}): ModelSummary[] {
    const { where, args } = this.filterSql(filter)
    const sql =
      `SELECT name, version, framework, digest, size, labels, created_at FROM models ` +
      `${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY name, created_at DESC, id DESC`
    return (this.db.prepare(sql).all(...args) as ModelRow[]).map((r) => ({
      tag: formatTag(r.name, r.version),
      name: r.name,
      version: r.version,
      framework: r.framework,
      digest: r.digest,
      size: r.size,
      labels: parseObject(r.labels) as Record<string, string>,
      created: new Date(r.created_at).toISOString(),
    }))
  }

  private filterSql(filter: ListFilter): { where: string[]; args: unknown[] } {
    const where: string[] = []
    const args: unknown[] = []
    if (filter.name !== undefined) {
      where.push('name = ?')
      args.push(filter.name)
    }
    for (const [key, value] of Object.entries(filter.labels ?? {})) {
      if (value === true) {
        where.push('id IN (SELECT model_id FROM model_labels WHERE key = ?)')
        args.push(key)
      } else {
        where.push('id IN (SELECT model_id FROM model_labels WHERE key = ? AND value = ?)')
        args.push(key, value)
      }
    }
    return { where, args }
  }

  list(filter: ListFilter = {}): ModelInfo[] {
    const { where, args } = this.filterSql(filter)
    const sql =
      `SELECT ${COLUMNS} FROM models ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ` +
      `name, created_at DESC, id DESC`
    const rows = this.db.prepare(sql).all(...args) as ModelRow[]
    if (rows.length === 0) return []
    // One pass over the file table beats one query per model once there are thousands of them.
    const filesById = new Map<number, ModelFile[]>()
    const fileRows = (
      where.length === 0
        ? this.q.allFiles!.all()
        : this.db
            .prepare(
              `SELECT model_id, path, blob, size FROM model_files WHERE model_id IN (SELECT id FROM models WHERE ` +
                `${where.join(' AND ')}) ORDER BY model_id, path`,
            )
            .all(...args)
    ) as FileRow[]
    for (const f of fileRows) {
      let list = filesById.get(f.model_id)
      if (list === undefined) filesById.set(f.model_id, (list = []))
      list.push({ path: f.path, sha256: f.blob, size: f.size })
    }
    return rows.map((r) => this.toPublic(r, filesById.get(r.id) ?? []))
  }

  count(): number {
    return (this.q.count!.get() as { n: number }).n
  }

  /** Inserts a model with its files and labels; call inside a transaction. */
  insert(m: NewModel): number {
    const { lastInsertRowid } = this.q.insertModel!.run({
      name: m.name,
      version: m.version,
      framework: m.framework,
      digest: m.digest,
      size: m.size,
      labels: JSON.stringify(m.labels),
      metadata: JSON.stringify(m.metadata),
      signatures: JSON.stringify(m.signatures),
      createdAt: m.createdAt,
    })
    const id = Number(lastInsertRowid)
    for (const f of m.files) this.q.insertFile!.run(id, f.path, f.sha256, f.size)
    for (const [k, v] of Object.entries(m.labels)) this.q.insertLabel!.run(id, k, v)
    return id
  }

  remove(id: number): void {
    this.q.deleteModel!.run(id)
  }

  refs(id: number): { kind: string; ref: string }[] {
    return this.q.refsOf!.all(id) as { kind: string; ref: string }[]
  }

  addRef(id: number, kind: string, ref: string): void {
    this.q.addRef!.run(id, kind, ref)
  }

  removeRef(id: number, kind: string, ref: string): void {
    this.q.removeRef!.run(id, kind, ref)
  }

  /** Drops every reference `kind ref` holds (a bundle being deleted). */
  removeRefsTo(kind: string, ref: string): void {
    this.q.removeRefsTo!.run(kind, ref)
  }

  isBlobInUse(sha256: string): boolean {
    return this.q.blobReferenced!.get(sha256, sha256) !== undefined || this.q.blobLeased!.get(sha256) !== undefined
  }

  isDigestInUse(digest: string): boolean {
    return this.q.digestInUse!.get(digest, digest) !== undefined
  }

  lease(sha256: string, owner: string, host: string, pid: number, now: number): void {
    this.q.addLease!.run(sha256, owner, host, pid, now)
  }

  dropLeases(owner: string): void {
    this.q.dropLeases!.run(owner)
  }

  leases(): { blob: string; owner: string; host: string; pid: number; created_at: number }[] {
    return this.q.allLeases!.all() as { blob: string; owner: string; host: string; pid: number; created_at: number }[]
  }

  /** Tags of the models (and `bundle name:version` of bundles) holding a blob (for verify's report). */
  modelsWithBlob(sha256: string): string[] {
    return (this.q.modelsWithBlob!.all(sha256, sha256) as { tag: string }[]).map((r) => r.tag)
  }

  /** Every blob the index references, with its size. */
  referencedBlobs(): { blob: string; size: number }[] {
    return this.q.allBlobs!.all() as { blob: string; size: number }[]
  }
}
