import Database from 'better-sqlite3'
import { BundleError } from '../../errors/index.js'
import { LATEST_SCHEMA, MIGRATIONS } from './migrations.js'

export type Db = Database.Database

const BUSY_TIMEOUT_MS = 10_000

/**
 * Opens (creating if needed) the index and brings its schema up to date.
 * WAL lets readers proceed while one process writes. synchronous=FULL: a delete's commit must
 * be durable before its blobs are unlinked, or a power loss could bring back a row whose
 * blob is gone.
 */
export function openIndex(file: string): Db {
  let db: Db
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS })
  } catch (cause) {
    const translated = translateSqliteError(cause)
    if (translated !== cause) throw translated
    throw new BundleError('E_STORE_IO', `cannot open the store index ${file}: ${(cause as Error).message}`, { cause })
  }
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.pragma('foreign_keys = ON')
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    migrate(db)
  } catch (err) {
    db.close()
    throw translateSqliteError(err)
  }
  return db
}

function migrate(db: Db): void {
  const current = db.pragma('user_version', { simple: true }) as number
  if (current > LATEST_SCHEMA) {
    throw new BundleError(
      'E_STORE_SCHEMA_NEWER',
      `the store index has schema ${current}; this modelbundle knows up to ${LATEST_SCHEMA}`,
    )
  }
  if (current === LATEST_SCHEMA) return
  // IMMEDIATE: two processes opening a fresh store at once must not both migrate.
  db.transaction(() => {
    const now = db.pragma('user_version', { simple: true }) as number
    for (const m of MIGRATIONS) {
      if (m.version <= now) continue
      db.exec(m.sql)
      db.pragma(`user_version = ${m.version}`)
    }
  }).immediate()
}

/** SQLITE_BUSY past the timeout becomes a coded error; anything else passes through. */
export function translateSqliteError(err: unknown): unknown {
  const code = (err as { code?: string } | null)?.code
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
    return new BundleError(
      'E_STORE_BUSY',
      `the store index is locked by another process (waited ${BUSY_TIMEOUT_MS / 1000}s)`,
      { cause: err },
    )
  }
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT')
    return new BundleError(
      'E_STORE_CORRUPT',
      `the store index is damaged or not a SQLite database (${(err as Error).message})`,
      { cause: err },
    )
  if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code?.startsWith('SQLITE_IOERR'))
    return new BundleError('E_STORE_IO', `the store index cannot be written: ${(err as Error).message}`, { cause: err })
  if (code === 'SQLITE_FULL')
    return new BundleError('E_STORE_NO_SPACE', 'the disk holding the store index is full', { cause: err })
  return err
}
