import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import {
  createServiceApp,
  defineApi,
  defineService,
  ensemble,
  io,
  onnxRunner,
  type ServiceApp,
} from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { tempDir } from '../utils/tmp.js'

// A declarative ensemble of three real models in worker processes, served over /v2 and called
// from an API method: in → neg → negx, in → exp → expx, (negx, expx) → add → out = e^x − x.

const vec = (name: string) => ({ name, dtype: 'float32' as const, dims: ['n', 4] })

describe('ensembles over /v2', () => {
  let svc: ServiceApp
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  const post = async (path: string, body?: unknown) => {
    const r = await svc.app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const get = async (path: string) => {
    const r = await svc.app.request(path)
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }

  before(async () => {
    const store = ModelStore.open({ home })
    const one = (op: string) =>
      writeOnnxModel(join(dir, `${op}.onnx`), {
        nodes: [{ op, inputs: ['x'], outputs: ['y'] }],
        inputs: [vec('x')],
        outputs: [vec('y')],
      })
    await store.save({ name: 'neg', version: '1.0.0', paths: [one('Neg')] })
    await store.save({ name: 'exp', version: '1.0.0', paths: [one('Exp')] })
    const add = writeOnnxModel(join(dir, 'add.onnx'), {
      nodes: [{ op: 'Add', inputs: ['a', 'b'], outputs: ['c'] }],
      inputs: [vec('a'), vec('b')],
      outputs: [vec('c')],
    })
    await store.save({ name: 'add', version: '1.0.0', paths: [add] })
    store.close()
    const opts = { home, batching: { maxBatchSize: 8, maxLatencyMs: 1000 }, workers: 1 }
    const neg = onnxRunner('neg:1.0.0', opts)
    const exp = onnxRunner('exp:1.0.0', opts)
    const sum = onnxRunner('add:1.0.0', opts)
    const pipe = ensemble('exp-minus', {
      description: 'e^x − x, with −x as a second output',
      steps: [
        { model: neg, inputMap: { x: 'in' }, outputMap: { y: 'negx' } },
        { model: 'exp', inputMap: { x: 'in' }, outputMap: { y: 'expx' } },
        { model: sum, inputMap: { a: 'negx', b: 'expx' }, outputMap: { c: 'out' } },
      ],
      outputs: ['out', 'negx'],
    })
    const def = defineService({
      name: 'ensemble-test',
      runners: [neg, exp, sum, pipe],
      apis: {
        // The same ensemble from code.
        expMinus: defineApi({
          input: io.json(z.object({ x: z.array(z.number()).length(4) })),
          output: io.json(z.object({ y: z.array(z.number()) })),
          handler: async ({ x }) => {
            const out = await pipe.run({ in: { dtype: 'float32', shape: [1, 4], data: new Float32Array(x) } })
            return { y: Array.from(out.out!.data as Float32Array) }
          },
        }),
      },
    })
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }), storeHome: home })
    await svc.start()
  })
  after(() => svc.stop())

  it('serves the ensemble as its own model: metadata, config, ready, index', async () => {
    const meta = await get('/v2/models/exp-minus')
    assert.equal(meta.status, 200)
    assert.deepEqual(meta.json, {
      name: 'exp-minus',
      versions: ['1'],
      platform: 'ensemble',
      inputs: [{ name: 'in', datatype: 'FP32', shape: [-1, 4] }],
      outputs: [
        { name: 'out', datatype: 'FP32', shape: [-1, 4] },
        { name: 'negx', datatype: 'FP32', shape: [-1, 4] },
      ],
    })
    const cfg = await get('/v2/models/exp-minus/config')
    assert.equal(cfg.json.platform, 'ensemble')
    assert.equal(cfg.json.max_batch_size, 8)
    assert.deepEqual(cfg.json.ensemble_scheduling.step[2], {
      model_name: 'add',
      model_version: -1,
      input_map: { a: 'negx', b: 'expx' },
      output_map: { c: 'out' },
    })
    assert.equal((await svc.app.request('/v2/models/exp-minus/ready')).status, 200)
    assert.equal((await svc.app.request('/v2/models/exp-minus/versions/1/ready')).status, 200)
    assert.equal((await get('/v2/models/exp-minus/versions/2')).status, 404)
    const index = await post('/v2/repository/index')
    assert.deepEqual(
      index.json.find((m: { name: string }) => m.name === 'exp-minus'),
      { name: 'exp-minus', version: '1', state: 'READY' },
    )
    const unload = await post('/v2/repository/models/exp-minus/unload')
    assert.equal(unload.status, 400)
    assert.match(unload.json.error, /ensemble of this service; unload its step models instead/)
  })

  it('infers through every step: right values, output subset, errors that name the input', async () => {
    const x = [0, 1, -1, 2]
    const want = x.map((v) => Math.exp(v) - v)
    const r = await post('/v2/models/exp-minus/infer', {
      id: 'req-7',
      inputs: [{ name: 'in', shape: [1, 4], datatype: 'FP32', data: x }],
    })
    assert.equal(r.status, 200, JSON.stringify(r.json))
    assert.equal(r.json.id, 'req-7')
    assert.equal(r.json.model_name, 'exp-minus')
    const out = r.json.outputs.find((o: { name: string }) => o.name === 'out')
    const negx = r.json.outputs.find((o: { name: string }) => o.name === 'negx')
    for (const [i, v] of (out.data as number[]).entries())
      assert.ok(Math.abs(v - want[i]!) < 1e-5, `${v} vs ${want[i]}`)
    assert.deepEqual(
      negx.data,
      x.map((v) => -v), // -0 for 0: values are served exactly, sign of zero included
    )
    const only = await post('/v2/models/exp-minus/infer', {
      inputs: [{ name: 'in', shape: [2, 4], datatype: 'FP32', data: [...x, ...x] }],
      outputs: [{ name: 'negx' }],
    })
    assert.deepEqual(
      only.json.outputs.map((o: { name: string; shape: number[] }) => [o.name, o.shape]),
      [['negx', [2, 4]]],
    )
    const wrong = await post('/v2/models/exp-minus/infer', {
      inputs: [{ name: 'in', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] }],
    })
    assert.equal(wrong.status, 400)
    assert.match(wrong.json.error, /input "in": expected shape \[-1,4\]/)
    const big = await post('/v2/models/exp-minus/infer', {
      inputs: [{ name: 'in', shape: [9, 4], datatype: 'FP32', data: new Array(36).fill(0) }],
    })
    assert.equal(big.status, 400)
    assert.match(big.json.error, /max_batch_size 8/)
    // From code, through an API method.
    const api = await post('/expMinus', { x })
    assert.equal(api.status, 200, JSON.stringify(api.json))
    for (const [i, v] of (api.json.y as number[]).entries()) assert.ok(Math.abs(v - want[i]!) < 1e-5)
  })

  it('counts every call per step, and the step models see the calls in their own stats', async () => {
    const before = (await get('/v2/models/exp-minus/stats')).json.model_stats[0]
    const negBefore = (await get('/v2/models/neg/stats')).json.model_stats[0].inference_count
    await Promise.all(
      Array.from({ length: 5 }, () =>
        post('/v2/models/exp-minus/infer', {
          inputs: [{ name: 'in', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
        }),
      ),
    )
    const s = (await get('/v2/models/exp-minus/stats')).json.model_stats[0]
    assert.equal(s.inference_count - before.inference_count, 5)
    assert.equal(s.inference_stats.success.count - before.inference_stats.success.count, 5)
    assert.deepEqual(
      s.step_stats.map((x: { model_name: string; model_version: string }) => `${x.model_name}:${x.model_version}`),
      ['neg:1.0.0', 'exp:1.0.0', 'add:1.0.0'],
    )
    for (const [i, step] of s.step_stats.entries()) {
      assert.equal(step.success.count - before.step_stats[i].success.count, 5)
      assert.ok(step.success.ns > 0)
    }
    // The steps' runners served them (the ensemble goes through their batchers, not around them).
    assert.equal((await get('/v2/models/neg/stats')).json.model_stats[0].inference_count - negBefore, 5)
    const all = (await get('/v2/models/stats')).json.model_stats.map((m: { name: string }) => m.name)
    assert.ok(all.includes('exp-minus'))
  })
})
