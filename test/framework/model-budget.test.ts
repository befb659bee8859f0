import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { createServiceApp, defineService, type ServiceApp } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { writeSizedModels } from '../utils/sized-models.js'
import { tempDir } from '../utils/tmp.js'

// Models under a memory budget (bundle serve --models … --memory-budget), on real model hosts:
// loads on demand, least-recently-used eviction by bytes, pins, refusals, and the metrics. The
// budget is set from the server's own memory, measured by a first server (a probe), so the room
// left for models is about 24 MiB whatever this process holds; the assertions read the capacity
// and the sizes the server reports.

const MiB = 1024 ** 2
const MB = 1e6

describe('models under a memory budget', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  // m0…m5 of 6 MB, and m6 of 64 MB: larger than the room the budget leaves.
  mkdirSync(join(dir, 'big'))
  const sized = [
    ...writeSizedModels(dir, 6, 6 * MB, 6 * MB),
    writeSizedModels(join(dir, 'big'), 1, 64 * MB, 64 * MB)[0]!,
  ]
  let svc: ServiceApp
  const post = async (path: string, body?: unknown) => {
    const r = await svc.app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const infer = (k: number) =>
    post(`/v2/models/m${k}/infer`, { inputs: [{ name: 'x', shape: [1, 8], datatype: 'FP32', data: Array(8).fill(1) }] })
  const metric = async (series: string) => {
    const text = await (await svc.app.request('/metrics')).text()
    const line = text.split('\n').find((l) => l.startsWith(`${series} `))
    return line === undefined ? undefined : Number(line.split(' ')[1])
  }
  const index = async () =>
    (await post('/v2/repository/index')).json as {
      name: string
      state: string
      size_bytes?: number
      pinned?: boolean
      last_used?: string
    }[]
  const loaded = async () => (await index()).filter((r) => r.state === 'READY').map((r) => r.name)
  const app = (budgetBytes: number) =>
    createServiceApp(defineService({ name: 'models', apis: {}, modelsOnly: true }), {
      logger: pino({ level: 'silent' }),
      storeHome: home,
      models: sized.map((_, i) => ({ name: `m${i}`, tag: `m${i}` })),
      servable: (n) => /^m\d$/.test(n),
      memory: { budgetBytes },
    })

  before(async () => {
    const store = ModelStore.open({ home })
    // The 64 MB model is saved as m6 from its own file (writeSizedModels named it m0).
    for (const [i, m] of sized.entries()) await store.save({ name: `m${i}`, version: '1', paths: [m.path] })
    store.close()
    const probe = app(64 * 1024 * MiB)
    await probe.start()
    svc = probe
    const capacity = (await metric('bundle_model_cache_bytes{state="capacity"}'))!
    await probe.stop()
    svc = app(64 * 1024 * MiB - capacity + 24 * MiB)
    await svc.start()
  })
  after(() => svc.stop())

  it('every model is available, none loaded; a request loads its model and is answered by it', async () => {
    const rows = await index()
    assert.deepEqual(
      rows.filter((r) => r.name !== 'm6').map((r) => r.state),
      Array(6).fill('UNAVAILABLE'),
    )
    assert.match((await post('/v2/repository/index')).json[0].reason, /memory budget/)
    assert.equal((await svc.app.request('/v2/models/m3/ready')).status, 200, 'ready: it loads on request')
    const r = await infer(3)
    assert.equal(r.status, 200, JSON.stringify(r.json))
    assert.ok(Math.abs(r.json.outputs[0].data[0] - 4) < 0.01)
    assert.deepEqual(await loaded(), ['m3'])
    assert.equal(await metric('bundle_model_loads_total{model="m3"}'), 1)
    const size = (await index()).find((x) => x.name === 'm3')!.size_bytes!
    assert.ok(size > 5 * MB && size < 9 * MB, `m3 measured at ${size} bytes (its file: 6 MB)`)
    assert.equal(await metric('bundle_model_bytes{model="m3"}'), size)
  })

  it('evicts the least recently used to make room, keeps used ≤ capacity, and never fails a request', async () => {
    const capacity = (await metric('bundle_model_cache_bytes{state="capacity"}'))!
    const order = [0, 1, 2, 3, 4, 5]
    for (const k of order) {
      const r = await infer(k)
      assert.equal(r.status, 200, JSON.stringify(r.json))
      assert.ok(Math.abs(r.json.outputs[0].data[0] - (1 + k)) < 0.01, `m${k} answered ${r.json.outputs[0].data[0]}`)
      assert.ok((await metric('bundle_model_cache_bytes{state="used"}'))! <= capacity)
    }
    // What stays is the longest run of the most recent that fits.
    const size = new Map((await index()).map((r) => [r.name, r.size_bytes ?? 0]))
    const expected: string[] = []
    let sum = 0
    for (const k of [...order].reverse()) {
      if (sum + size.get(`m${k}`)! > capacity) break
      sum += size.get(`m${k}`)!
      expected.unshift(`m${k}`)
    }
    assert.ok(expected.length >= 2 && expected.length < 6, `room for ${expected.length} of 6`)
    assert.deepEqual(await loaded(), expected)
    const evictions = [0, 1, 2, 3, 4, 5].reduce(
      async (n, k) => (await n) + ((await metric(`bundle_model_evictions_total{model="m${k}"}`)) ?? 0),
      Promise.resolve(0),
    )
    assert.ok((await evictions) >= 6 - expected.length)
  })

  it('many requests at once for one cold model cause one load, and all are answered', async () => {
    const warm = await loaded()
    const cold = [0, 1, 2, 3, 4, 5].find((k) => !warm.includes(`m${k}`))!
    const before = (await metric(`bundle_model_loads_total{model="m${cold}"}`)) ?? 0
    const all = await Promise.all(Array.from({ length: 8 }, () => infer(cold)))
    for (const r of all) assert.equal(r.status, 200)
    assert.equal(await metric(`bundle_model_loads_total{model="m${cold}"}`), before + 1)
  })

  it('8 clients over all six models: every answer right, nothing refused', async () => {
    let next = 0
    const wrong: string[] = []
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = next++; i < 120; i = next++) {
          const k = (i * 7) % 6
          const r = await infer(k)
          if (r.status !== 200 || Math.abs(r.json.outputs[0].data[0] - (1 + k)) > 0.01)
            wrong.push(`m${k}: ${r.status} ${JSON.stringify(r.json).slice(0, 120)}`)
        }
      }),
    )
    assert.deepEqual(wrong, [])
  })

  it('an explicit load pins a model: it stays through pressure until an explicit unload', async () => {
    assert.equal((await post('/v2/repository/models/m5/load')).status, 200)
    for (const k of [0, 1, 2, 3, 4, 0, 1, 2]) assert.equal((await infer(k)).status, 200)
    const m5 = (await index()).find((r) => r.name === 'm5')!
    assert.equal(m5.state, 'READY')
    assert.equal(m5.pinned, true)
    assert.equal((await post('/v2/repository/models/m5/unload')).status, 200)
    assert.equal((await index()).find((r) => r.name === 'm5')!.state, 'UNAVAILABLE')
    assert.equal((await infer(5)).status, 404, 'unloaded explicitly: not served until loaded again')
    assert.equal((await post('/v2/repository/models/m5/load')).status, 200)
    assert.equal((await infer(5)).status, 200)
    assert.equal((await post('/v2/repository/models/m5/unload')).status, 200)
  })

  it('a model larger than the whole budget is refused with a coded error, and nothing is evicted for it', async () => {
    const before = await loaded()
    const r = await infer(6)
    assert.equal(r.status, 507, JSON.stringify(r.json))
    assert.match(r.json.error, /m6 needs .* more than the whole model memory budget/)
    const load = await post('/v2/repository/models/m6/load')
    assert.equal(load.status, 400)
    assert.match(load.json.error, /failed to load 'm6'.*more than the whole model memory budget/)
    assert.deepEqual(await loaded(), before)
  })
})
