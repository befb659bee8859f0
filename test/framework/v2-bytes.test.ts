import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io, onnxRunner, type ServiceApp } from '../../framework/index.js'
import { encodeStrings } from '../../runners/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { tempDir } from '../utils/tmp.js'

// BYTES tensors (ONNX string) end to end: JSON and binary, through a real worker and its batcher.

describe('Open Inference Protocol: BYTES tensors', () => {
  let svc: ServiceApp
  const dir = tempDir()
  const home = join(dir, 'home')
  const words = onnxRunner('words:1.0.0', { home, batching: { maxBatchSize: 8, maxLatencyMs: 5_000 } })

  before(async () => {
    const store = ModelStore.open({ home })
    const file = writeOnnxModel(join(dir, 'words.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['text'], outputs: ['same'] }],
      inputs: [{ name: 'text', dtype: 'string', dims: ['n', 2] }],
      outputs: [{ name: 'same', dtype: 'string', dims: ['n', 2] }],
    })
    await store.save({ name: 'words', version: '1.0.0', paths: [file] })
    store.close()
    const def = defineService({
      name: 'bytes-test',
      runners: [words],
      apis: {
        ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
      },
    })
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
    await svc.start()
  })
  after(() => svc.stop())

  const infer = async (body: Uint8Array | string, headers: Record<string, string> = {}) => {
    const r = await svc.app.request('/v2/models/words/infer', { method: 'POST', body: body as never, headers })
    return { status: r.status, headers: r.headers, buf: Buffer.from(await r.arrayBuffer()) }
  }

  it('metadata says BYTES; JSON strings in and out, unicode included', async () => {
    const meta = (await (await svc.app.request('/v2/models/words')).json()) as { inputs: { datatype: string }[] }
    assert.equal(meta.inputs[0]!.datatype, 'BYTES')
    const r = await infer(
      JSON.stringify({
        inputs: [
          {
            name: 'text',
            shape: [2, 2],
            datatype: 'BYTES',
            data: [
              ['héllo', ''],
              ['wörld', '日本'],
            ],
          },
        ],
      }),
    )
    assert.equal(r.status, 200, r.buf.toString())
    const out = JSON.parse(r.buf.toString()).outputs[0]
    assert.deepEqual(out, { name: 'same', datatype: 'BYTES', shape: [2, 2], data: ['héllo', '', 'wörld', '日本'] })
  })

  it('binary BYTES (4-byte length + bytes) in and out; malformed bytes are a 400', async () => {
    const blob = encodeStrings(['a', 'bc', 'def', 'ghij'])
    const head = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'text', shape: [2, 2], datatype: 'BYTES', parameters: { binary_data_size: blob.byteLength } }],
        outputs: [{ name: 'same', parameters: { binary_data: true } }],
      }),
    )
    const r = await infer(new Uint8Array(Buffer.concat([head, blob])), {
      'inference-header-content-length': String(head.byteLength),
    })
    assert.equal(r.status, 200, r.buf.toString())
    const n = Number(r.headers.get('inference-header-content-length'))
    assert.deepEqual(JSON.parse(r.buf.subarray(0, n).toString()).outputs[0].parameters, {
      binary_data_size: blob.byteLength,
    })
    assert.ok(r.buf.subarray(n).equals(Buffer.from(blob)))
    const broken = Buffer.from([9, 0, 0, 0, 65])
    const head2 = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'text', shape: [1, 2], datatype: 'BYTES', parameters: { binary_data_size: broken.byteLength } },
        ],
      }),
    )
    const bad = await infer(new Uint8Array(Buffer.concat([head2, broken])), {
      'inference-header-content-length': String(head2.byteLength),
    })
    assert.equal(bad.status, 400)
    assert.match(JSON.parse(bad.buf.toString()).error, /not a sequence of 4-byte lengths/)
    const notStrings = await infer(
      JSON.stringify({ inputs: [{ name: 'text', shape: [1, 2], datatype: 'BYTES', data: [1, 2] }] }),
    )
    assert.equal(notStrings.status, 400)
  })

  it('concurrent string requests share batches and each gets its own rows back', async () => {
    const rows = Array.from({ length: 12 }, (_, i) => [`r${i}-a`, `r${i}-${'x'.repeat(i)}`])
    const answers = await Promise.all(
      rows.map((row) => words.run({ text: { dtype: 'string', shape: [1, 2], data: row } })),
    )
    for (const [i, a] of answers.entries()) assert.deepEqual(a.same!.data, rows[i])
    const stats = (await (await svc.app.request('/v2/models/words/stats')).json()) as {
      model_stats: { batch_stats: { batch_size: number }[] }[]
    }
    assert.ok(
      stats.model_stats[0]!.batch_stats.some((b) => b.batch_size > 1),
      'some batches held several requests',
    )
  })
})
