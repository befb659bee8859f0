import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir, writeFile } from '../utils/tmp.js'

const blobCount = (home: string): number => readdirSync(join(home, 'blobs', 'sha256')).flatMap((d) => readdirSync(join(home, 'blobs', 'sha256', d))).length

describe('content-addressed blobs', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const store = ModelStore.open({ home })
  after(() => store.close())

  it('two versions (and two models) with identical files use one blob on disk', async () => {
    const v1 = await store.save({ name: 'cls', version: '1.0.0', paths: [MODELS.cls] })
    const v2 = await store.save({ name: 'cls', version: '1.1.0', paths: [MODELS.cls] })
    await store.save({ name: 'cls-copy', paths: [MODELS.cls] })
    assert.equal(v1.digest, v2.digest)
    assert.equal(blobCount(home), 1)
  })

  it('a blob goes only when its last model goes', async () => {
    store.delete(['cls:1.0.0'])
    assert.equal(blobCount(home), 1)
    store.delete(['cls'], { allVersions: true })
    assert.equal(blobCount(home), 1)
    store.delete(['cls-copy'])
    assert.equal(blobCount(home), 0)
  })

  it('deleting a model a bundle references is refused unless forced, and nothing is deleted', async () => {
    const f = writeFile(dir, 'w.bin', 'weights')
    await store.save({ name: 'used', version: '1.0.0', paths: [f] })
    await store.save({ name: 'free', version: '1.0.0', paths: [f] })
    store.addReference('used:1.0.0', 'bundle', 'ocr-service:abc')
    assert.throws(() => store.delete(['free', 'used']), (err: BundleError) => err.code === 'E_STORE_MODEL_REFERENCED' && /ocr-service:abc/.test(err.message))
    assert.equal(store.list().length, 2, 'the unreferenced model in the same call is kept too')
    assert.deepEqual(store.delete(['used'], { force: true }).map((m) => m.tag), ['used:1.0.0'])
    assert.deepEqual(store.list().map((m) => m.tag), ['free:1.0.0'])
  })

  it('a version already stored is a conflict', async () => {
    await assert.rejects(store.save({ name: 'free', version: '1.0.0', paths: [MODELS.keys] }), (err: BundleError) => err.code === 'E_STORE_TAG_EXISTS')
  })
})

describe('blob leases', () => {
  it('a blob leased by a writer survives the collection of a concurrent delete', async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    const store = ModelStore.open({ home })
    const f = writeFile(dir, 'c.bin', 'common content')
    const m = await store.save({ name: 'c', version: '1.0.0', paths: [f] })
    const sha = m.files[0]!.sha256
    // A writer between "lease + place" and "commit": the blob exists and nothing references it yet.
    store.write(() => store.index.lease(sha, 'writer-a', 'host', process.pid, Date.now()))
    store.delete(['c:1.0.0'])
    assert.equal(store.blobs.has(sha), true, 'the lease kept the blob')
    store.write(() => store.index.dropLeases('writer-a'))
    store.collect([sha])
    assert.equal(store.blobs.has(sha), false, 'without the lease it is collected')
    store.close()
  })

  it('gc drops leases of writers that died and reclaims what they placed', async () => {
    const dir = tempDir()
    const store = ModelStore.open({ home: join(dir, 'home') })
    const staged = await store.blobs.stageFile(writeFile(dir, 'd.bin', 'orphan'))
    store.write(() => store.index.lease(staged.sha256, 'dead-writer', hostname(), 2 ** 22 + 12345, Date.now()))
    store.blobs.place(staged)
    const before = await store.verify()
    assert.equal(before.ok, true)
    assert.deepEqual(before.garbage, { blobs: 0, tempFiles: 0, staleLeases: 1, checkouts: 0 })
    const r = await store.gc()
    assert.equal(r.staleLeases, 1)
    assert.equal(r.blobs, 1)
    assert.equal(store.blobs.has(staged.sha256), false)
    store.close()
  })
})
