import assert from 'node:assert/strict'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import pino from 'pino'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'

describe('examples/quickstart: the text-direction classifier', () => {
  it('imports its model on first start, then tells upright from upside-down text lines', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    process.env.BUNDLE_HOME = home // the example uses the default store, as `npm start` does
    const { Quickstart } = await import('../../examples/quickstart/service.js')
    const { createServiceApp, definitionOf } = await import('../../framework/index.js')
    const { ModelStore } = await import('../../store/index.js')
    const svc = createServiceApp(definitionOf(Quickstart)!, { logger: pino({ level: 'silent' }) })
    await svc.start()
    try {
      assert.equal((await svc.app.request('/readyz')).status, 200)
      const store = ModelStore.open({ home })
      assert.deepEqual(
        store.list().map((m) => m.tag),
        ['ocr-cls:2.0.0'],
      )
      store.close()

      for (const name of ['hello', 'invoice', 'quick']) {
        for (const angle of [0, 180]) {
          const png = readFileSync(new URL(`../fixtures/images/${name}-${angle}.png`, import.meta.url))
          const r = await svc.app.request('/classify', {
            method: 'POST',
            headers: { 'content-type': 'image/png' },
            body: new Uint8Array(png),
          })
          assert.equal(r.status, 200)
          const body = (await r.json()) as { angle: number; score: number }
          assert.equal(body.angle, angle, `${name} rotated ${angle}`)
          assert.ok(body.score > 0.9)
        }
      }

      const x = new Float32Array(2 * 3 * 48 * 192)
      const t = await svc.app.request('/classifyTensor', {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '2,3,48,192' },
        body: new Uint8Array(x.buffer),
      })
      assert.equal(t.status, 200)
      const results = ((await t.json()) as { results: { angle: number; score: number }[] }).results
      assert.equal(results.length, 2)
      const bad = await svc.app.request('/classifyTensor', {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '2,3,48,100' },
        body: new Uint8Array(2 * 3 * 48 * 100 * 4),
      })
      assert.equal(bad.status, 400)

      // Runner series on the same /metrics: 6 images + 2 tensor rows went through the model.
      const samples = parsePrometheus(await (await svc.app.request('/metrics')).text())
      const value = (name: string, extra: Record<string, string> = {}) =>
        samples.find(
          (s) =>
            s.name === name &&
            s.labels.runner === 'ocr-cls' &&
            s.labels.method === 'run' &&
            Object.entries(extra).every(([k, v]) => s.labels[k] === v),
        )?.value
      assert.equal(value('bundle_runner_inference_total'), 8)
      assert.ok(value('bundle_runner_execution_total')! >= 1)
      assert.equal(value('bundle_runner_batch_size_sum'), 8)
      assert.equal(value('bundle_runner_queue_duration_seconds_count'), 7)
      assert.equal(value('bundle_runner_rejected_total', { reason: 'deadline' }), 0)
      assert.equal(value('bundle_runner_queue_depth'), 0)
      // Its load in replicas: 8 rows offered over the last seconds, a small fraction of one replica (the
      // API process's busy share can count more, never more than one replica).
      const desired = samples.find((s) => s.name === 'bundle_desired_replicas' && s.labels.service === 'quickstart')
      assert.ok(desired !== undefined && desired.value > 0 && desired.value <= 1, JSON.stringify(desired))
      assert.equal(
        samples.find((s) => s.name === 'bundle_runner_worker_restarts' && s.labels.runner === 'ocr-cls')?.value,
        0,
      )

      // Workers and threads the defaults chose (the service sets neither): two workers where there
      // are two cores for a model this small, each with the cores less one shared among them.
      const { defaultCpuWorkers, defaultIntraOpThreads, usableCores } = await import('../../runners/onnx/threads.js')
      const { MODELS } = await import('../utils/models.js')
      const workers = defaultCpuWorkers(statSync(MODELS.cls).size)
      if (usableCores() === 2) assert.equal(workers, 2, 'two cores: two workers')
      const [cls] = (await (await svc.app.request('/runners')).json()) as {
        config: { workers: number; intraOpThreads: number }
      }[]
      assert.equal(cls!.config.workers, workers)
      assert.equal(cls!.config.intraOpThreads, defaultIntraOpThreads(workers))
    } finally {
      await svc.stop()
    }
  })
})

describe('bundle serve --config: operators tune runners without touching code', () => {
  it('file and environment overrides reach the runner and show on /runners', { timeout: 120_000 }, async () => {
    const { spawn } = await import('node:child_process')
    const { writeFileSync } = await import('node:fs')
    const { BIN } = await import('../utils/cli.js')
    const dir = tempDir()
    const cfg = join(dir, 'serve.yaml')
    writeFileSync(
      cfg,
      'runners:\n  ocr-cls:\n    workers: 1\n    deadlineMs: 5000\n    batching:\n      maxBatchSize: ' +
        '8\n      maxDelayMs: 3\n',
    )
    const { listeningUrl } = await import('../utils/port.js')
    const child = spawn(
      process.execPath,
      [BIN, 'serve', 'examples/quickstart/service.ts', '--port', '0', '--config', cfg],
      {
        env: {
          ...process.env,
          BUNDLE_HOME: join(dir, 'home'),
          BUNDLE_RUNNER_OCR_CLS_DEADLINE_MS: '25',
          BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_QUEUE_SIZE: '100',
          BUNDLE_RUNNER_OCR_CLS_WARMUP_ROUNDS: '2',
        },
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    )
    const exited = new Promise((r) => child.on('exit', r))
    const url = await listeningUrl(child).catch((e: unknown) => (child.kill('SIGKILL'), Promise.reject(e)))
    try {
      let body:
        | {
            name: string
            ready: boolean
            config: {
              workers: number
              intraOpThreads: number
              deadlineMs: number
              batchesPerWorker: number
              batching: { maxBatchSize: number; maxDelayMs: number }
              warmup: unknown
            }
            batcher: { observations: number; queuedRows: number }
          }[]
        | undefined
      for (let i = 0; i < 200 && body?.[0]?.ready !== true; i++) {
        await new Promise((r) => setTimeout(r, 100))
        body = await fetch(`${url}/runners`).then(
          (r) => r.json() as never,
          () => undefined,
        )
      }
      assert.equal(body?.[0]?.name, 'ocr-cls')
      assert.equal(body![0]!.config.workers, 1, 'the file overrides the default (two on two cores)')
      // Not configured: the cores less one for the API process, for its one worker.
      const { defaultIntraOpThreads } = await import('../../runners/onnx/threads.js')
      assert.equal(body![0]!.config.intraOpThreads, defaultIntraOpThreads(1))
      // The environment wins over the file, the file over the code, key by key.
      assert.equal(body![0]!.config.deadlineMs, 25)
      assert.equal(body![0]!.config.batchesPerWorker, 2, 'the default shows too')
      assert.deepEqual(body![0]!.config.batching, {
        enabled: true,
        maxBatchSize: 8,
        maxDelayMs: 3,
        maxQueueSize: 100,
        batchDim: [0, 0],
        decided: 'the first dimension of every input and output is variable',
      })
      // The environment's warm-up rounds merge with the shapes the code gives.
      assert.deepEqual(body![0]!.config.warmup, { rounds: 2, sizes: [1, 2, 4, 8], shapes: { x: [3, 48, 192] } })
      // Warm-up timed 2 rounds per size before ready (sizes past one too slow for the 25 ms
      // bound are skipped: at least size 1, 2 timings per size).
      assert.ok(
        body![0]!.batcher.observations >= 2 && body![0]!.batcher.observations % 2 === 0,
        `observations: ${body![0]!.batcher.observations}`,
      )
      assert.equal(body![0]!.batcher.queuedRows, 0)
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })

  it('GRPC_PORT: the classifier over gRPC too, as `npm start` serves it; a bad port is a usage error', {
    timeout: 120_000,
  }, async () => {
    const { serveReady } = await import('../utils/serve.js')
    const { inferenceClient } = await import('../utils/grpc.js')
    const { bundle } = await import('../utils/cli.js')
    const bad = await bundle(['serve', 'examples/quickstart/service.ts', '--grpc-port', 'x'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /^error E_CLI_USAGE: --grpc-port "x" must be an integer from 0 to 65535/)
    const s = await serveReady('examples/quickstart/service.ts', [], { GRPC_PORT: '0' })
    const grpcUrl = s.grpcUrl
    assert.ok(grpcUrl, s.output())
    const client = inferenceClient(grpcUrl)
    try {
      // A batch of 8 text lines of 48×192, all zeros: 8 answers of two scores summing to 1.
      const res = await client.call('ModelInfer', {
        model_name: 'ocr-cls',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [8, 3, 48, 192] }],
        raw_input_contents: [Buffer.alloc(8 * 3 * 48 * 192 * 4)],
      })
      assert.deepEqual(res.outputs[0].shape, ['8', '2'])
      const scores = new Float32Array(new Uint8Array(res.raw_output_contents[0]).buffer)
      for (let i = 0; i < 8; i++) assert.ok(Math.abs(scores[2 * i]! + scores[2 * i + 1]! - 1) < 1e-4)
    } finally {
      client.close()
      await s.stop('SIGTERM')
    }
  })
})
