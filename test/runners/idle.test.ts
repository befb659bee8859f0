import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { createServiceApp, defineApi, defineService, io } from '../../framework/index.js'
import { OnnxRunner } from '../../runners/onnx-runner.js'
import { defaultCpuWorkers } from '../../runners/onnx/threads.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { parsePrometheus } from '../utils/prom.js'
import { runnerWorkers, until } from '../utils/procs.js'
import { tempDir } from '../utils/tmp.js'

const workers = (runner: string): number[] => runnerWorkers(runner)

describe('idle models leave memory and come back on the next request', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const ready = (async () => {
    const store = ModelStore.open({ home })
    const file = writeOnnxModel(join(dir, 'ident.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'ident', version: '1.0.0', paths: [file] })
    store.close()
  })()
  const x = { dtype: 'float32' as const, shape: [1, 4], data: new Float32Array([1, 2, 3, 4]) }
  // The workers a runner that sets none starts with, for a model this small (two on two cores).
  const WORKERS = defaultCpuWorkers(1024)

  it('a runner idle past idleUnloadMs stops its workers; the next run loads it again and answers', {
    timeout: 60_000,
  }, async () => {
    await ready
    const runner = new OnnxRunner('ident', { name: 'idle-a', home, idleUnloadMs: 300 })
    await runner.start()
    after(() => runner.stop())
    assert.deepEqual(Array.from((await runner.run({ x })).y!.data as Float32Array), [1, 2, 3, 4])
    assert.equal(workers('idle-a').length, WORKERS)
    await until('the idle unload', () => !runner.loaded())
    await until('the worker to exit', () => workers('idle-a').length === 0)
    assert.equal(runner.idleUnloads, 1)
    assert.equal(runner.ready(), true, 'still ready: it loads on demand')
    // Concurrent requests share one load, and every one is answered.
    const answers = await Promise.all(
      [1, 2, 3].map((v) => runner.run({ x: { ...x, data: new Float32Array([v, v, v, v]) } })),
    )
    assert.deepEqual(
      answers.map((a) => (a.y!.data as Float32Array)[0]),
      [1, 2, 3],
    )
    assert.equal(runner.loaded(), true)
    assert.equal(workers('idle-a').length, WORKERS)
  })

  it('a pinned runner swapped to another version comes back from an idle unload with that version', {
    timeout: 60_000,
  }, async () => {
    await ready
    const store = ModelStore.open({ home })
    const spec = (op: string) => ({
      nodes: [{ op, inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32' as const, dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32' as const, dims: ['n', 4] }],
    })
    const v1 = await store.save({
      name: 'flip',
      version: '1.0.0',
      paths: [writeOnnxModel(join(dir, 'flip-1.onnx'), spec('Identity'))],
    })
    await store.save({ name: 'flip', version: '2.0.0', paths: [writeOnnxModel(join(dir, 'flip-2.onnx'), spec('Neg'))] })
    store.close()
    const runner = new OnnxRunner('flip:1.0.0', { name: 'idle-b', home, idleUnloadMs: 300 })
    runner.pin(v1.tag, v1.digest) // as a bundle pins it
    await runner.start()
    after(() => runner.stop())
    await runner.swap('flip:2.0.0')
    assert.deepEqual(Array.from((await runner.run({ x })).y!.data as Float32Array), [-1, -2, -3, -4])
    await until('the idle unload', () => !runner.loaded())
    assert.deepEqual(
      Array.from((await runner.run({ x })).y!.data as Float32Array),
      [-1, -2, -3, -4],
      'the swapped-in version, not a pin mismatch',
    )
  })

  it('through the server: the repository index and metrics show it, /v2 inference brings it back', {
    timeout: 60_000,
  }, async () => {
    await ready
    const def = defineService({
      name: 'idle-svc',
      apis: { ping: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }) },
    })
    const svc = createServiceApp(def, { logger: pino({ level: 'silent' }), storeHome: home })
    await svc.start()
    after(() => svc.stop())
    const post = async (path: string, body?: unknown) => {
      const r = await svc.app.request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      })
      return { status: r.status, json: (await r.json()) as any }
    }
    assert.equal(
      (await post('/v2/repository/models/ident/load', { parameters: { config: { idleUnloadMs: 300 } } })).status,
      200,
    )
    const metric = async (name: string) =>
      parsePrometheus(await (await svc.app.request('/metrics')).text()).find(
        (s) => s.name === name && s.labels.runner === 'ident',
      )?.value
    assert.equal(await metric('bundle_runner_loaded'), 1)
    await until('the idle model to unload', async () => (await metric('bundle_runner_loaded')) === 0, 10_000)
    const row = (await post('/v2/repository/index')).json.find((m: { name: string }) => m.name === 'ident')
    assert.deepEqual(row, {
      name: 'ident',
      version: '1.0.0',
      state: 'UNAVAILABLE',
      reason: 'unloaded while idle; loads on the next request',
    })
    assert.equal(await metric('bundle_runner_loaded'), 0)
    assert.equal(await metric('bundle_runner_idle_unloads'), 1)
    const r = await post('/v2/models/ident/infer', {
      inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [5, 6, 7, 8] }],
    })
    assert.equal(r.status, 200)
    assert.deepEqual(r.json.outputs[0].data, [5, 6, 7, 8])
    assert.equal(await metric('bundle_runner_loaded'), 1)
  })
})
