import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir, writeFile } from '../utils/tmp.js'

const blobCount = (home: string): number =>
  readdirSync(join(home, 'blobs', 'sha256')).flatMap((d) => readdirSync(join(home, 'blobs', 'sha256', d))).length

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
    assert.throws(
      () => store.delete(['free', 'used']),
      (err: BundleError) => err.code === 'E_STORE_MODEL_REFERENCED' && /ocr-service:abc/.test(err.message),
    )
    assert.equal(store.list().length, 2, 'the unreferenced model in the same call is kept too')
    assert.deepEqual(
      store.delete(['used'], { force: true }).map((m) => m.tag),
      ['used:1.0.0'],
    )
    assert.deepEqual(
      store.list().map((m) => m.tag),
      ['free:1.0.0'],
    )
  })

  it('a version already stored is a conflict', async () => {
    await assert.rejects(
      store.save({ name: 'free', version: '1.0.0', paths: [MODELS.keys] }),
      (err: BundleError) => err.code === 'E_STORE_TAG_EXISTS',
    )
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

describe('review fixes', () => {
  it(
    'import --force of the same content is "already present" and keeps references; replacing a referenced model ' +
      'is refused',
    async () => {
      const dir = tempDir()
      const a = ModelStore.open({ home: join(dir, 'a') })
      const f = writeFile(dir, 'r.bin', 'referenced')
      await a.save({ name: 'r', version: '1.0.0', paths: [f] })
      a.addReference('r:1.0.0', 'bundle', 'svc:1')
      const { path } = await a.export('r:1.0.0', dir)
      assert.equal((await a.import(path, { force: true })).status, 'already-present')
      assert.deepEqual(a.references('r:1.0.0'), [{ kind: 'bundle', ref: 'svc:1' }])
      const b = ModelStore.open({ home: join(dir, 'b') })
      await b.save({ name: 'r', version: '1.0.0', paths: [writeFile(dir, 'other.bin', 'other content')] })
      const { path: other } = await b.export('r:1.0.0', join(dir, 'other.bundlemodel'))
      await assert.rejects(
        a.import(other, { force: true }),
        (err: BundleError) => err.code === 'E_STORE_MODEL_REFERENCED',
      )
      assert.deepEqual(
        a.get('r:1.0.0').files.map((x) => x.path),
        ['r.bin'],
      )
      a.close()
      b.close()
    },
  )

  it('labels named like Object.prototype members are ordinary labels', async () => {
    const { parseLabelArgs } = await import('../../store/index.js')
    assert.deepEqual(parseLabelArgs(['constructor=x', 'toString=y']), { constructor: 'x', toString: 'y' })
  })

  it('a broken symbolic link in a saved directory is a coded error', async () => {
    const dir = tempDir()
    const { mkdirSync, symlinkSync } = await import('node:fs')
    mkdirSync(join(dir, 'model'))
    writeFile(join(dir, 'model'), 'ok.bin', 'x')
    symlinkSync(join(dir, 'missing'), join(dir, 'model', 'dangling'))
    const store = ModelStore.open({ home: join(dir, 'home') })
    await assert.rejects(
      store.save({ name: 'm', paths: [join(dir, 'model')] }),
      (err: BundleError) => err.code === 'E_STORE_FILE_NOT_FOUND' && /dangling/.test(err.message),
    )
    symlinkSync('..', join(dir, 'model', 'loop'))
    await assert.rejects(
      store.save({ name: 'm', paths: [join(dir, 'model')] }),
      (err: BundleError) => err.code === 'E_STORE_FILE_NOT_FOUND',
    )
    store.close()
  })
})
