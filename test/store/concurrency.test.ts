import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { ModelStore } from '../../store/index.js'
import { tempDir, writeFile } from '../utils/tmp.js'

const WORKER = fileURLToPath(new URL('../fixtures/store-worker.ts', import.meta.url))

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    child.on('close', (code) => resolve({ code, out, err }))
  })
}

describe('concurrent writers', () => {
  it('4 processes saving and deleting at once leave a consistent index', { timeout: 180_000 }, async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    ModelStore.open({ home }).close() // create it first, so the test is about writers, not migrations
    const shared = writeFile(dir, 'shared.bin', 'weights shared by every model\n'.repeat(1000))
    writeFile(dir, 'churn.bin', 'content saved and deleted over and over\n'.repeat(100))
    const results = await Promise.all(['1', '2', '3', '4'].map((id) => run([home, id, '12', shared, dir])))
    for (const r of results) assert.equal(r.code, 0, r.err)
    const counts = results.map((r) => JSON.parse(r.out) as { saved: number; deleted: number })
    const saved = counts.reduce((n, c) => n + c.saved, 0)
    assert.equal(saved, 4 * 12 * (2 + 8))

    const store = ModelStore.open({ home })
    const report = await store.verify()
    assert.equal(report.ok, true, JSON.stringify(report))
    assert.deepEqual(report.garbage, { blobs: 0, tempFiles: 0, staleLeases: 0, checkouts: 0 })
    const models = store.list()
    const deleted = counts.reduce((n, c) => n + c.deleted, 0)
    assert.equal(models.length, saved - deleted)
    // Exactly the referenced blobs are on disk: nothing lost, nothing leaked.
    const onDisk = readdirSync(join(home, 'blobs', 'sha256'))
      .flatMap((d) => readdirSync(join(home, 'blobs', 'sha256', d)))
      .sort()
    const referenced = [...new Set(models.flatMap((m) => m.files.map((f) => f.sha256)))].sort()
    assert.deepEqual(onDisk, referenced)
    store.close()
    const db = new Database(join(home, 'index.db'), { readonly: true })
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM blob_leases').get() as { n: number }).n, 0)
    assert.equal((db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check, 'ok')
    assert.equal(
      (
        db.prepare('SELECT COUNT(*) AS n FROM model_files WHERE model_id NOT IN (SELECT id FROM models)').get() as {
          n: number
        }
      ).n,
      0,
    )
    db.close()
  })
})
