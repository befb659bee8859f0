import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io, onnxRunner, type ServiceApp } from '../../framework/index.js'
import { RedisLink } from '../../runners/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'

// The response cache on the real Redis at 127.0.0.1:6379, under a key prefix of its own that
// the test deletes afterwards.

const REDIS = 'redis://127.0.0.1:6379'

describe('response cache (opt-in per runner, in Redis)', () => {
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  const prefix = `mbtest-cache-${process.pid}`
  const link = new RedisLink(REDIS, prefix)
  let svc: ServiceApp
  const infer = async (data: number[], headers: Record<string, string> = {}) => {
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', parameters: { binary_data_size: 16 } }],
        parameters: { binary_data_output: true },
      }),
    )
    const r = await svc.app.request('/v2/models/neg/infer', {
      method: 'POST',
      headers: { 'inference-header-content-length': String(header.byteLength), ...headers },
      body: Buffer.concat([header, Buffer.from(new Float32Array(data).buffer)]),
    })
    assert.equal(r.status, 200)
    const body = Buffer.from(await r.arrayBuffer())
    return body.subarray(Number(r.headers.get('inference-header-content-length')))
  }
  const metric = async (name: string) =>
    parsePrometheus(await (await svc.app.request('/metrics')).text()).find(
      (s) => s.name === name && s.labels.runner === 'neg',
    )?.value ?? 0
  const executions = async () =>
    ((await (await svc.app.request('/v2/models/neg/stats')).json()) as any).model_stats[0].execution_count as number

  before(async () => {
    const store = ModelStore.open({ home })
    const neg = writeOnnxModel(join(dir, 'neg.onnx'), {
      nodes: [{ op: 'Neg', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'neg', version: '1.0.0', paths: [neg] })
    store.close()
    const runner = onnxRunner('neg:1.0.0', { home, workers: 1, cache: { ttlMs: 60_000 } })
    const def = defineService({
      name: 'cache-test',
      runners: [runner],
      apis: {
        ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
      },
    })
    await link.connected()
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }), storeHome: home, redis: link })
    await svc.start()
  })
  after(async () => {
    await svc.stop()
    const keys = await link.client().keys(`${prefix}:*`)
    if (keys.length) await link.client().del(...keys)
    await link.close()
  })

  it('a repeated input is answered from Redis with identical bytes, without running the model', async () => {
    const x = [1.5, -2, 3.25, Math.PI]
    const first = await infer(x)
    const ran = await executions()
    assert.equal(await metric('bundle_runner_cache_misses_total'), 1)
    const second = await infer(x)
    assert.ok(second.equals(first), 'identical bytes')
    assert.deepEqual(
      [...new Float32Array(new Uint8Array(second).buffer)],
      x.map((v) => -Math.fround(v)),
    )
    assert.equal(await metric('bundle_runner_cache_hits_total'), 1)
    assert.equal(await executions(), ran, 'the hit never reached the model')
    // Another input is a miss; the keys carry the model digest, so another version never hits.
    await infer([0, 0, 0, 1])
    assert.equal(await metric('bundle_runner_cache_misses_total'), 2)
    const keys = await link.client().keys(`${prefix}:cache:*`)
    assert.equal(keys.length, 2)
    const digest = (
      (await (await svc.app.request('/v2/models/neg/config')).json()) as { digest: string }
    ).digest.replace('sha256:', '')
    assert.ok(keys.every((k) => k.startsWith(`${prefix}:cache:${digest}:`)))
    const ttl = await link.client().pttl(keys[0]!)
    assert.ok(ttl > 0 && ttl <= 60_000, `TTL ${ttl}`)
  })

  it('a runner with a cache refuses to start without Redis; an unreachable cache is a miss, not an error', async () => {
    const lone = onnxRunner('neg:1.0.0', { home, cache: true })
    const def = defineService({
      name: 'no-redis',
      runners: [lone],
      apis: {
        ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
      },
    })
    const app = createServiceApp(def, { logger: pino({ level: 'silent' }), storeHome: home })
    await assert.rejects(
      app.start(),
      (err: any) => err.code === 'E_SERVE_CONFIG_INVALID' && /--redis/.test(err.message),
    )
    await app.stop()
    const down = new RedisLink('redis://127.0.0.1:1', prefix)
    const r2 = onnxRunner('neg:1.0.0', { home, cache: true, workers: 1 })
    const app2 = createServiceApp(
      defineService({
        name: 'redis-down',
        runners: [r2],
        apis: {
          ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
        },
      }),
      { logger: pino({ level: 'silent' }), storeHome: home, redis: down },
    )
    await app2.start()
    const out = await r2.run({ x: { dtype: 'float32', shape: [1, 4], data: new Float32Array([1, 2, 3, 4]) } })
    assert.deepEqual([...(out.y!.data as Float32Array)], [-1, -2, -3, -4])
    await app2.stop()
    await down.close()
  })
})
