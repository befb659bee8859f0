import Database from 'better-sqlite3'
import { BundleError } from '../../errors/index.js'
import { LATEST_SCHEMA, MIGRATIONS } from './migrations.js'

export type Db = Database.Database

const BUSY_TIMEOUT_MS = 10_000

/**
 * Opens (creating if needed) the index and brings its schema up to date.
 * WAL lets readers proceed while one process writes; synchronous=NORMAL keeps the index
 * consistent on power loss (it may lose the last commits, never reference a missing blob,
 * because blobs are fsynced before their row is written).
 */
export function openIndex(file: string): Db {
  let db: Db
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS })
  } catch (cause) {
    throw new BundleError('E_STORE_IO', `cannot open the store index ${file}: ${(cause as Error).message}`, { cause })
  }
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
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
    throw new BundleError('E_STORE_SCHEMA_NEWER', `the store index has schema ${current}; this modelbundle knows up to ${LATEST_SCHEMA}`)
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
    return new BundleError('E_STORE_BUSY', `the store index is locked by another process (waited ${BUSY_TIMEOUT_MS / 1000}s)`, { cause: err })
  }
  if (code === 'SQLITE_FULL') return new BundleError('E_STORE_NO_SPACE', 'the disk holding the store index is full', { cause: err })
  return err
}
