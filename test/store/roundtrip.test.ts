import assert from 'node:assert/strict'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir } from '../utils/tmp.js'

describe('round trip with the real PaddleOCR cls model', () => {
  const dir = tempDir()
  const a = ModelStore.open({ home: join(dir, 'a') })
  const b = ModelStore.open({ home: join(dir, 'b') })
  after(() => {
    a.close()
    b.close()
  })

  it('save → list → get → export → import into a second home keeps the digest', async () => {
    const saved = await a.save({
      name: 'ocr-cls',
      paths: [MODELS.cls, MODELS.keys],
      labels: { task: 'direction' },
      metadata: { source: 'paddleocr' },
    })
    assert.equal(saved.framework, 'onnx')
    assert.equal(saved.version.length, 16)
    assert.equal(saved.files.length, 2)
    assert.equal(saved.size, statSync(MODELS.cls).size + statSync(MODELS.keys).size)

    const listed = a.list()
    assert.deepEqual(
      listed.map((m) => m.tag),
      [saved.tag],
    )
    assert.deepEqual(
      a.list({ labels: { task: 'direction' } }).map((m) => m.tag),
      [saved.tag],
    )
    assert.deepEqual(a.list({ labels: { task: 'other' } }), [])

    const got = a.get('ocr-cls')
    const sig = got.signatures['ch_ppocr_mobile_v2.0_cls_infer.onnx']!
    assert.equal(sig.inputs[0]!.name, 'x')
    assert.equal(sig.inputs[0]!.dtype, 'float32')
    assert.deepEqual(sig.inputs[0]!.shape, [-1, 3, -1, -1])
    assert.equal(sig.inputs[0]!.dimNames[1], null)
    assert.deepEqual(sig.outputs[0]!.shape, [-1, 2])
    assert.deepEqual(got.metadata, { source: 'paddleocr' })

    const { path } = await a.export('ocr-cls', dir)
    assert.equal(path, join(dir, `ocr-cls-${saved.version}.bundlemodel`))
    const imported = await b.import(path)
    assert.equal(imported.status, 'imported')
    assert.equal(imported.model.digest, saved.digest)
    assert.equal(imported.model.created, saved.created)
    assert.deepEqual(imported.model.signatures, saved.signatures)
    assert.deepEqual(imported.model.labels, saved.labels)

    const files = await b.paths(saved.tag)
    assert.deepEqual(readFileSync(files.files['ch_ppocr_mobile_v2.0_cls_infer.onnx']!), readFileSync(MODELS.cls))
    assert.deepEqual(readdirSync(files.dir).sort(), ['ch_ppocr_mobile_v2.0_cls_infer.onnx', 'ppocr_keys_v1.txt'])
    assert.equal((await b.verify()).ok, true)
  })

  it('exporting the same model twice gives identical bytes', async () => {
    const one = await a.export('ocr-cls', join(dir, 'one.bundlemodel'))
    const two = await a.export('ocr-cls', join(dir, 'two.bundlemodel'))
    assert.deepEqual(readFileSync(one.path), readFileSync(two.path))
  })

  it('importing twice is "already present"; different content under the tag needs --force', async () => {
    const { path } = await a.export('ocr-cls', join(dir, 'again.bundlemodel'))
    assert.equal((await b.import(path)).status, 'already-present')

    const version = a.get('ocr-cls').version
    const other = ModelStore.open({ home: join(dir, 'c') })
    await other.save({ name: 'ocr-cls', version, paths: [MODELS.keys] })
    const { path: conflicting } = await other.export(`ocr-cls:${version}`, join(dir, 'conflict.bundlemodel'))
    other.close()

    await assert.rejects(
      b.import(conflicting),
      (err: BundleError) => err.code === 'E_STORE_TAG_EXISTS' && /--force/.test(err.message),
    )
    assert.equal(b.get('ocr-cls').files.length, 2, 'the stored model is untouched')
    const replaced = await b.import(conflicting, { force: true })
    assert.equal(replaced.status, 'replaced')
    assert.equal(b.get('ocr-cls').files.length, 1)
    const v = await b.verify()
    assert.equal(v.ok, true)
    assert.equal(v.garbage.blobs, 0, "the replaced model's blobs were collected")
  })

  it('a file that is not ONNX is refused before anything is stored', async () => {
    const bad = join(dir, 'broken.onnx')
    const { writeFileSync } = await import('node:fs')
    writeFileSync(bad, 'not a model')
    await assert.rejects(
      a.save({ name: 'broken', paths: [bad] }),
      (err: BundleError) => err.code === 'E_STORE_ONNX_INVALID',
    )
    assert.deepEqual(a.list({ name: 'broken' }), [])
    const saved = await a.save({ name: 'broken', paths: [bad], framework: 'custom' })
    assert.deepEqual(saved.signatures, {})
  })
})
