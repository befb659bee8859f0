import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { HOST, isProcessAlive, pidOfTempName, removeQuietly } from './fs-util.js'
import type { ModelStore } from './model-store.js'
import type { GcReport, VerifyReport } from './types.js'

/** A lease or temp file older than this is abandoned even if its pid now belongs to someone else. */
const STALE_AFTER_MS = 24 * 60 * 60 * 1000

function blobFilesOnDisk(store: ModelStore): string[] {
  const out: string[] = []
  let shards: string[]
  try {
    shards = readdirSync(store.layout.blobs)
  } catch {
    return out
  }
  for (const shard of shards) {
    try {
      for (const f of readdirSync(join(store.layout.blobs, shard))) if (/^[0-9a-f]{64}$/.test(f)) out.push(f)
    } catch {
      // not a directory
    }
  }
  return out
}

function isStaleLease(l: { host: string; pid: number; created_at: number }, now: number): boolean {
  if (now - l.created_at > STALE_AFTER_MS) return true
  return l.host === HOST && !isProcessAlive(l.pid)
}

function staleTempEntries(store: ModelStore, now: number): string[] {
  return store.tempEntries().filter((name) => {
    const pid = pidOfTempName(name)
    if (pid !== undefined && !isProcessAlive(pid)) return true
    try {
      return now - statSync(join(store.layout.tmp, name)).mtimeMs > STALE_AFTER_MS
    } catch {
      return false
    }
  })
}

function unusedCheckouts(store: ModelStore): string[] {
  let dirs: string[]
  try {
    dirs = readdirSync(store.layout.checkouts)
  } catch {
    return []
  }
  return dirs.filter((d) => !store.index.isDigestInUse(`sha256:${d}`))
}

/**
 * Re-hashes every blob the index references. Missing or corrupt blobs make the report not ok;
 * leftovers of interrupted writes (unreferenced blobs, temp files, stale leases) are counted
 * as garbage, which is harmless and reclaimed by `gc`.
 */
export async function verifyStore(store: ModelStore): Promise<VerifyReport> {
  const referenced = store.index.referencedBlobs()
  const report: VerifyReport = {
    models: store.index.count(),
    blobs: referenced.length,
    bytes: 0,
    missing: [],
    corrupt: [],
    garbage: { blobs: 0, tempFiles: 0, staleLeases: 0, checkouts: 0 },
    ok: true,
  }
  for (const { blob, size } of referenced) {
    report.bytes += size
    const state = await store.blobs.check(blob, size)
    if (state === 'ok') continue
    // A concurrent delete may have removed it since the list was read: only referenced blobs count.
    const models = store.index.modelsWithBlob(blob)
    if (models.length > 0) report[state].push({ sha256: blob, models })
  }
  const now = Date.now()
  const known = new Set(referenced.map((r) => r.blob))
  report.garbage.blobs = blobFilesOnDisk(store).filter((b) => !known.has(b) && !store.index.isBlobInUse(b)).length
  report.garbage.staleLeases = store.index.leases().filter((l) => isStaleLease(l, now)).length
  report.garbage.tempFiles = staleTempEntries(store, now).length
  report.garbage.checkouts = unusedCheckouts(store).length
  report.ok = report.missing.length === 0 && report.corrupt.length === 0
  return report
}

/** Reclaims what interrupted writers left behind. Safe to run while other processes use the store. */
export async function gcStore(store: ModelStore): Promise<GcReport> {
  const now = Date.now()
  const stale = store.index.leases().filter((l) => isStaleLease(l, now))
  store.write(() => {
    for (const l of stale) store.index.dropLeases(l.owner)
  })
  const temp = staleTempEntries(store, now)
  for (const name of temp) await removeQuietly(join(store.layout.tmp, name))
  const { blobs, bytes } = store.collect(blobFilesOnDisk(store))
  const checkouts = store.write(() => {
    const unused = unusedCheckouts(store)
    for (const d of unused) void removeQuietly(join(store.layout.checkouts, d))
    return unused.length
  })
  return { blobs, bytes, tempFiles: temp.length, staleLeases: new Set(stale.map((l) => l.owner)).size, checkouts }
}
