import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import {
  createServiceApp,
  customRunner,
  defineApi,
  defineService,
  io,
  onnxRunner,
  type Runner,
} from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'

describe('the Runner contract', () => {
  it('onnx and custom runners both serve through it: GET /runners shows what they run with, metrics their workers ' +
    'and load', {
    timeout: 90_000,
  }, async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    const store = ModelStore.open({ home })
    const file = writeOnnxModel(join(dir, 'ident.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'ident', version: '1.0.0', paths: [file] })
    store.close()

    const model = onnxRunner('ident', { home, batching: { maxBatchSize: 4 } })
    const echo = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      { name: 'echo', methods: { upper: { batchable: true, maxBatchSize: 8 } } },
    )
    // Both are Runners as declared: the server needs nothing else of them.
    const runners: Runner[] = [model, echo]
    assert.deepEqual(
      runners.map((r) => [r.kind, r.versions !== undefined, r.remote !== undefined]),
      [
        ['onnx', true, true],
        ['custom', false, true],
      ],
    )

    const def = defineService({
      name: 'contract',
      runners,
      apis: {
        shout: defineApi({
          input: io.text(),
          output: io.json(z.array(z.string())),
          handler: (t: string) => echo.batch<string, string>('upper', [t]),
        }),
      },
    })
    const svc = createServiceApp(def, {
      logger: pino({ level: 'silent' }),
      storeHome: home,
      runnerConfig: { echo: { workers: 2, batching: { maxDelayMs: 3 } }, ident: { workers: 2 } },
    })
    await svc.start()
    after(() => svc.stop())

    const shouted = await svc.app.request('/shout', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hi',
    })
    assert.deepEqual(await shouted.json(), ['HI/1'])

    const listed = (await (await svc.app.request('/runners')).json()) as {
      name: string
      ready: boolean
      config: Record<string, any>
    }[]
    const config = Object.fromEntries(listed.map((r) => [r.name, r.config]))
    assert.ok(listed.every((r) => r.ready))
    // The running generation: the workers it started, its resolved batching, the model it serves.
    assert.equal(config.ident!.kind, 'onnx')
    assert.equal(config.ident!.workers, 2)
    assert.equal(config.ident!.model, 'ident:1.0.0')
    assert.match(String(config.ident!.digest), /^sha256:/)
    assert.deepEqual(config.ident!.batching, {
      enabled: true,
      maxBatchSize: 4,
      maxDelayMs: 10,
      maxQueueSize: 256,
      batchDim: [0, 0],
      decided: 'the first dimension of every input and output is variable',
    })
    assert.equal(config.ident!.timeoutMs, 30_000)
    // The operator's batching applies to every batchable method, over the code, defaults filled in.
    assert.equal(config.echo!.kind, 'custom')
    assert.equal(config.echo!.workers, 2)
    assert.equal(config.echo!.batchesPerWorker, 2)
    assert.deepEqual(config.echo!.methods, {
      upper: { batchable: true, maxBatchSize: 8, maxDelayMs: 3, deadlineMs: 10_000, maxQueueSize: 512 },
    })

    const samples = parsePrometheus(await (await svc.app.request('/metrics')).text())
    const metric = (name: string, runner: string) =>
      samples.find((s) => s.name === name && s.labels.runner === runner)?.value
    for (const runner of ['ident', 'echo']) {
      assert.equal(metric('bundle_runner_workers', runner), 2, `${runner} workers`)
      assert.equal(metric('bundle_runner_loaded', runner), 1, `${runner} loaded`)
      assert.equal(metric('bundle_runner_worker_restarts', runner), 0, `${runner} restarts`)
    }
    assert.deepEqual(echo.health(), { loaded: true, idleUnloads: 0, workers: 2, restarts: 0 })
  })
})
