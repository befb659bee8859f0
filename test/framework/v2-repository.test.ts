import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io, onnxRunner, type ServiceApp } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

// Runtime model control through the repository extension, on real worker processes.

const ROW = 3 * 48 * 192

describe('model repository (/v2/repository)', () => {
  let svc: ServiceApp
  // Made here, not in before(): a temp dir made inside a hook is removed when the hook ends.
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  const post = async (
    path: string,
    body?: unknown,
    headers: Record<string, string> = { authorization: 'Bearer k' },
  ) => {
    const r = await svc.app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const get = async (path: string) => {
    const r = await svc.app.request(path)
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const identity = (data: number[]) => ({
    inputs: [{ name: 'x', shape: [data.length / 4, 4], datatype: 'FP32', data }],
  })

  before(async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-cls', version: '1.0.0', paths: [MODELS.cls] })
    await store.save({ name: 'ocr-cls', version: '2.0.0', paths: [MODELS.cls], labels: { generation: 'two' } })
    const ident = writeOnnxModel(join(dir, 'ident.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'ident', version: '1.0.0', paths: [ident] })
    const neg = writeOnnxModel(join(dir, 'neg.onnx'), {
      nodes: [{ op: 'Neg', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'ident', version: '2.0.0', paths: [neg] })
    store.close()
    const cls = onnxRunner('ocr-cls:1.0.0', {
      home,
      batching: { maxBatchSize: 8, maxLatencyMs: 10_000 },
      warmup: { shapes: { x: [3, 48, 192] } },
    })
    const def = defineService({
      name: 'repo-test',
      runners: [cls],
      apis: {
        classify: defineApi({
          input: io.json(z.object({ v: z.number() })),
          output: io.json(z.object({ p: z.array(z.number()) })),
          handler: async ({ v }) => {
            const out = await cls.run({
              x: { dtype: 'float32', shape: [1, 3, 48, 192], data: new Float32Array(ROW).fill(v) },
            })
            return { p: Array.from(out['softmax_0.tmp_0']!.data as Float32Array) }
          },
        }),
      },
    })
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }), apiKey: 'k', storeHome: home })
    await svc.start()
  })
  after(() => svc.stop())

  it('index lists the store with states; load, infer, unload a model the service does not declare', {
    timeout: 120_000,
  }, async () => {
    const index = await post('/v2/repository/index')
    assert.equal(index.status, 200)
    assert.deepEqual(
      index.json.map((m: { name: string; version: string; state: string }) => `${m.name}:${m.version} ${m.state}`),
      ['ident:1.0.0 UNAVAILABLE', 'ident:2.0.0 UNAVAILABLE', 'ocr-cls:1.0.0 READY', 'ocr-cls:2.0.0 UNAVAILABLE'],
    )
    assert.equal((await get('/v2/models/ident')).status, 404)
    const loaded = await post('/v2/repository/models/ident/load', {
      parameters: { version: '1.0.0', config: JSON.stringify({ workers: 2, batching: { maxBatchSize: 4 } }) },
    })
    assert.equal(loaded.status, 200, JSON.stringify(loaded.json))
    assert.deepEqual(loaded.json, { name: 'ident', version: '1.0.0' })
    const config = await get('/v2/models/ident/config')
    assert.equal(config.json.max_batch_size, 4)
    assert.deepEqual(config.json.instance_group, [{ count: 2, kind: 'KIND_CPU' }])
    const out = await post('/v2/models/ident/infer', identity([1, 2, 3, 4, 5, 6, 7, 8]))
    assert.equal(out.status, 200)
    assert.deepEqual(out.json.outputs[0].data, [1, 2, 3, 4, 5, 6, 7, 8])
    assert.ok(
      (await post('/v2/repository/index')).json.some(
        (m: { name: string; version: string; state: string }) =>
          m.name === 'ident' && m.version === '1.0.0' && m.state === 'READY',
      ),
    )
    // Metrics cover it too.
    assert.match(
      await (await svc.app.request('/metrics')).text(),
      /bundle_runner_inference_total\{[^}]*runner="ident"[^}]*\} 2/,
    )

    // Another version side by side, then unload one, then all.
    assert.equal(
      (await post('/v2/repository/models/ident/load', { parameters: { version: '2.0.0', keep: true } })).status,
      200,
    )
    assert.deepEqual(
      (await post('/v2/models/ident/versions/2.0.0/infer', identity([1, 2, 3, 4]))).json.outputs[0].data,
      [-1, -2, -3, -4],
    )
    assert.deepEqual(
      (await post('/v2/models/ident/versions/1.0.0/infer', identity([1, 2, 3, 4]))).json.outputs[0].data,
      [1, 2, 3, 4],
    )
    assert.deepEqual(
      (await post('/v2/models/ident/infer', identity([1, 2, 3, 4]))).json.outputs[0].data,
      [1, 2, 3, 4],
      'unversioned: the serving default',
    )
    // Metadata lists every version loaded now, the serving default first.
    assert.deepEqual((await get('/v2/models/ident')).json.versions, ['1.0.0', '2.0.0'])
    assert.deepEqual((await get('/v2/models/ident/versions/2.0.0')).json.versions, ['1.0.0', '2.0.0'])
    assert.equal((await post('/v2/repository/models/ident/unload', { parameters: { version: '2.0.0' } })).status, 200)
    assert.deepEqual((await get('/v2/models/ident')).json.versions, ['1.0.0'])
    assert.equal((await post('/v2/models/ident/versions/2.0.0/infer', identity([1, 2, 3, 4]))).status, 404)
    assert.equal((await post('/v2/repository/models/ident/unload')).status, 200)
    assert.equal((await get('/v2/models/ident')).status, 404)
    assert.equal((await post('/v2/models/ident/infer', identity([1, 2, 3, 4]))).status, 404)
  })

  it('load refuses what it cannot do, with the protocol error shape; mutations need the API key', {
    timeout: 60_000,
  }, async () => {
    const unknown = await post('/v2/repository/models/nothing/load')
    assert.equal(unknown.status, 404)
    assert.match(unknown.json.error, /failed to load 'nothing': the store has no model named nothing; save it first/)
    const badConfig = await post('/v2/repository/models/ident/load', { parameters: { config: { wrokers: 2 } } })
    assert.equal(badConfig.status, 400)
    assert.match(badConfig.json.error, /unknown key "wrokers"/)
    assert.equal((await post('/v2/repository/models/ident/load', undefined, {})).status, 401)
    assert.equal((await post('/v2/repository/models/ocr-cls/unload', undefined, {})).status, 401)
    // As Triton: unloading a model that is not loaded succeeds (there is nothing to do).
    assert.equal((await post('/v2/repository/models/ident/unload')).status, 200, 'not loaded')
  })

  it('swapping a serving model to a new version fails no request under continuous load; old workers go', {
    timeout: 180_000,
  }, async () => {
    const counts = { ok: 0, failed: 0, versions: new Set<string>(), errors: [] as string[] }
    let stop = false
    const x = Array.from(new Float32Array(ROW).fill(0.1))
    const loop = async (i: number) => {
      while (!stop) {
        const viaV2 = i % 2 === 0
        const r = viaV2
          ? await post('/v2/models/ocr-cls/infer', {
              inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'FP32', data: x }],
            })
          : await post('/classify', { v: 0.1 })
        // In-process requests never touch a socket: yield so worker replies get their turn.
        await new Promise((res) => setImmediate(res))
        if (r.status === 200) {
          counts.ok++
          if (viaV2) counts.versions.add(r.json.model_version)
        } else {
          counts.failed++
          counts.errors.push(`${r.status} ${JSON.stringify(r.json)}`)
        }
      }
    }
    const loops = Array.from({ length: 4 }, (_, i) => loop(i))
    await until('load flowing on 1.0.0', () => counts.versions.has('1.0.0') && counts.ok >= 20, 60_000)
    const before = counts.ok
    const swapped = await post('/v2/repository/models/ocr-cls/load', { parameters: { version: '2.0.0' } })
    assert.equal(swapped.status, 200, JSON.stringify(swapped.json))
    const atSwap = counts.ok
    await until('load flowing on 2.0.0', () => counts.versions.has('2.0.0') && counts.ok >= atSwap + 20, 60_000)
    stop = true
    await Promise.all(loops)
    assert.equal(counts.failed, 0, `no failed request: ${counts.errors.slice(0, 3).join('; ')}`)
    assert.ok(
      before > 0 && atSwap > before && counts.ok > atSwap,
      `requests flowed before, during and after: ${before}, ${atSwap}, ${counts.ok}`,
    )
    assert.deepEqual([...counts.versions].sort(), ['1.0.0', '2.0.0'])
    assert.deepEqual((await get('/v2/models/ocr-cls')).json.versions, ['2.0.0'])
    const runners = (await (await svc.app.request('/runners', { headers: { authorization: 'Bearer k' } })).json()) as {
      config: { model: string }
    }[]
    assert.equal(runners[0]!.config.model, 'ocr-cls:2.0.0', 'the service API uses the new version too')
  })

  it('unloading a model the service declares makes its API answer 503 until it is loaded again', {
    timeout: 120_000,
  }, async () => {
    assert.equal((await post('/v2/repository/models/ocr-cls/unload')).status, 200)
    const down = await post('/classify', { v: 0.1 })
    assert.equal(down.status, 503)
    assert.equal(down.json.error.code, 'E_RUNNER_STOPPED')
    assert.equal((await get('/v2/models/ocr-cls')).status, 404)
    assert.ok(
      (await post('/v2/repository/index')).json.some(
        (m: { name: string; state: string }) => m.name === 'ocr-cls' && m.state === 'UNAVAILABLE',
      ),
    )
    assert.equal((await post('/v2/repository/models/ocr-cls/load')).status, 200)
    assert.equal((await post('/classify', { v: 0.1 })).status, 200)
  })
})
