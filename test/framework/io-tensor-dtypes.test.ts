import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import {
  createServiceApp,
  defineApi,
  defineService,
  type DType,
  io,
  onnxRunner,
  type ServiceApp,
} from '../../framework/index.js'
import { parseLenientJson } from '../../framework/io/lenient-json.js'
import type { RunnerTensor } from '../../runners/index.js'
import { ModelStore } from '../../store/index.js'
import { conformanceCases } from '../utils/conformance-models.js'
import { difference } from '../utils/tensor-compare.js'
import { tempDir } from '../utils/tmp.js'
import { DATATYPE, fromRaw, jsonData, type PathTensor, rawAnswer, rawBytes } from '../utils/v2-paths.js'

// The service API path for every dtype: an @api whose input and output are io.tensor of that
// dtype, calling an onnx runner — scalar, zero-size and batched shapes — asked with a JSON body
// and with raw bytes, answered in JSON and in raw bytes, each compared with onnxruntime-node.

const picked = conformanceCases().filter((c) => /-(scalar|empty|varbatch)-1in-1out$/.test(c.id))

describe('io.tensor APIs of every dtype answer exactly what onnxruntime-node answers', () => {
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  let svc: ServiceApp

  before(async () => {
    const store = ModelStore.open({ home })
    for (const c of picked) {
      const file = join(dir, `${c.id}.onnx`)
      writeFileSync(file, c.model)
      await store.save({ name: c.id, version: '1', paths: [file] })
    }
    store.close()
    // Thread workers: 39 models in one service, each needs only a worker of its own to be served.
    const runners = picked.map((c) => onnxRunner(c.id, { home, workers: 1, isolation: 'thread' }))
    const apis = Object.fromEntries(
      picked.map((c, i) => {
        const dtype = c.inputs[0]!.dtype as DType
        return [
          c.id.replace(/-/g, '_'),
          defineApi({
            input: io.tensor({ dtype }),
            output: io.tensor({ dtype }),
            handler: async (x) => {
              const out = await runners[i]!.run({ x0: x as RunnerTensor })
              return out.y0 as never
            },
          }),
        ]
      }),
    )
    svc = createServiceApp(defineService({ name: 'dtypes', runners, apis }), { logger: pino({ level: 'silent' }) })
    await svc.start()
  })
  after(() => svc?.stop())

  it(`${picked.length} APIs (13 dtypes × scalar, zero-size, batched) through JSON and raw bodies`, {
    timeout: 300_000,
  }, async () => {
    assert.equal(picked.length, 39)
    const failures: string[] = []
    for (const c of picked) {
      const input = c.inputs[0]! as PathTensor
      const [expected] = await rawAnswer(c.model, [input])
      const route = `/${c.id.replace(/-/g, '_')}`
      // JSON in (the tensor form {shape, dtype, data}), JSON out.
      const body = `{"shape":${JSON.stringify(input.shape)},"dtype":"${input.dtype}","data":${jsonData(input)}}`
      const a = await svc.app.request(route, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      assert.equal(a.status, 200, `${c.id} JSON: ${await a.clone().text()}`)
      const doc = parseLenientJson(await a.text()) as { shape: number[]; dtype: string; data: unknown[] }
      const got = {
        dtype: doc.dtype === 'float16' ? 'float64' : doc.dtype,
        shape: doc.shape,
        data: doc.data.map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : v)) as never,
      }
      const d1 = difference(got, expected as never)
      if (d1) failures.push(`${c.id} JSON: ${d1}`)
      // Raw bytes in and out.
      const b = await svc.app.request(route, {
        method: 'POST',
        headers: {
          'content-type': 'application/octet-stream',
          accept: 'application/octet-stream',
          'x-tensor-shape': input.shape.join(','),
        },
        body: rawBytes(input),
      })
      assert.equal(b.status, 200, `${c.id} raw: ${await b.clone().text()}`)
      assert.equal(b.headers.get('x-tensor-shape'), expected!.shape.join(','))
      const raw = fromRaw('y0', DATATYPE[expected!.dtype]!, expected!.shape, new Uint8Array(await b.arrayBuffer()))
      const d2 = difference(raw as never, expected as never)
      if (d2) failures.push(`${c.id} raw: ${d2}`)
    }
    assert.deepEqual(failures, [])
  })
})
