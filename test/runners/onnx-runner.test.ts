import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import ort from 'onnxruntime-node'
import { OnnxRunner } from '../../runners/onnx-runner.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir } from '../utils/tmp.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { availableParallelism } from 'node:os'

const input = (rows: number, seed: number) => {
  const data = new Float32Array(rows * 3 * 48 * 192)
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.001 + seed) // deterministic, varied
  return { dtype: 'float32' as const, shape: [rows, 3, 48, 192], data }
}

/** A fresh store holding the cls model as ocr-cls:1.0.0. */
async function homeWithCls(): Promise<string> {
  const home = join(tempDir(), 'home')
  const store = ModelStore.open({ home })
  await store.save({ name: 'ocr-cls', version: '1.0.0', paths: [MODELS.cls] })
  store.close()
  return home
}

describe('OnnxRunner with the real PaddleOCR cls model', () => {
  it('batched and split runs in a worker give what onnxruntime gives in-process', { timeout: 120_000 }, async () => {
    const home = await homeWithCls()
    const session = await ort.InferenceSession.create(MODELS.cls)
    const direct = async (x: ReturnType<typeof input>) => {
      const out = await session.run({ x: new ort.Tensor('float32', x.data, x.shape) })
      return Array.from(Object.values(out)[0]!.data as Float32Array)
    }
    const runner = new OnnxRunner('ocr-cls:latest', {
      home,
      workers: 1,
      batching: { maxBatchSize: 2, maxLatencyMs: 30_000 },
    })
    await runner.start()
    try {
      assert.equal(runner.ready(), true)
      assert.equal(runner.model?.version, '1.0.0', 'the version is pinned at start')
      const requests = [input(1, 1), input(1, 2), input(3, 3), input(1, 4)]
      const results = await Promise.all(requests.map((x) => runner.run({ x })))
      for (const [i, r] of results.entries()) {
        const out = Object.values(r)[0]!
        assert.deepEqual(out.shape, [requests[i]!.shape[0], 2])
        const expected = await direct(requests[i]!)
        const got = Array.from(out.data as Float32Array)
        assert.equal(got.length, expected.length)
        for (const [j, v] of got.entries()) {
          assert.ok(Math.abs(v - expected[j]!) < 1e-4, `request ${i} value ${j}: ${v} vs ${expected[j]}`)
        }
      }
    } finally {
      await runner.stop()
      await session.release()
    }
  })
})

describe('OnnxRunner warm-up and shutdown', () => {
  it('every worker runs dummy batches of each size before it is ready; the batcher starts with their timings', {
    timeout: 120_000,
  }, async () => {
    const home = await homeWithCls()
    const runner = new OnnxRunner('ocr-cls', {
      home,
      workers: 2,
      batching: { maxBatchSize: 4, maxLatencyMs: 10_000 },
      warmup: { rounds: 2, shapes: { x: [3, 48, 192] } },
    })
    await runner.start()
    try {
      assert.deepEqual(runner.effectiveConfig().warmup, { rounds: 2, sizes: [1, 2, 4], shapes: { x: [3, 48, 192] } })
      // 2 workers × 2 timed rounds × 3 sizes (the two untimed first rounds are not counted)
      assert.equal(runner.stats()?.observations, 12)
      assert.equal(runner.ready(), true)
    } finally {
      await runner.stop()
    }
  })

  it('the cls model has a variable width: no warm-up by default, and asking for one without shapes names the fix', {
    timeout: 60_000,
  }, async () => {
    const home = await homeWithCls()
    const plain = new OnnxRunner('ocr-cls', { home })
    await plain.start()
    try {
      assert.match(String(plain.effectiveConfig().warmup), /variable non-batch dimensions; set warmup.shapes/)
      assert.equal(plain.stats()?.observations, 0)
    } finally {
      await plain.stop()
    }
    const asked = new OnnxRunner('ocr-cls', { home, warmup: { rounds: 1 } })
    await assert.rejects(
      asked.start(),
      (e: { code?: string; message: string }) =>
        e.code === 'E_SERVE_CONFIG_INVALID' && /warmup\.shapes\.x/.test(e.message),
    )
    const wrong = new OnnxRunner('ocr-cls', { home, warmup: { shapes: { x: [3, 48] } } })
    await assert.rejects(wrong.start(), /warm-up/)
    await wrong.stop()
  })

  it('stop() answers every queued request before the workers go; later calls get E_RUNNER_STOPPED', {
    timeout: 120_000,
  }, async () => {
    const home = await homeWithCls()
    const runner = new OnnxRunner('ocr-cls', { home, batching: { maxBatchSize: 2, maxLatencyMs: 60_000 } })
    await runner.start()
    const pending = Array.from({ length: 6 }, (_, i) => runner.run({ x: input(1, i) }))
    const stopped = runner.stop()
    await assert.rejects(runner.run({ x: input(1, 9) }), (e: { code?: string }) => e.code === 'E_RUNNER_STOPPED')
    const results = await Promise.all(pending)
    assert.equal(results.length, 6)
    for (const r of results) assert.deepEqual(Object.values(r)[0]!.shape, [1, 2])
    await stopped
    assert.equal(runner.ready(), false)
  })
})

describe('OnnxRunner batch dimension and resources', () => {
  it('batchDim 1: requests merge and split along dimension 1 and each gets its own columns back', {
    timeout: 120_000,
  }, async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    const store = ModelStore.open({ home })
    // A [3, n] model: the batch is the second dimension.
    const model = writeOnnxModel(join(dir, 'cols.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: [3, 'n'] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: [3, 'n'] }],
    })
    await store.save({ name: 'cols', version: '1.0.0', paths: [model] })
    const pair = writeOnnxModel(join(dir, 'pair.onnx'), {
      nodes: [{ op: 'Add', inputs: ['a', 'b'], outputs: ['c'] }],
      inputs: [
        { name: 'a', dtype: 'float32', dims: ['n', 2] },
        { name: 'b', dtype: 'float32', dims: ['n', 2] },
      ],
      outputs: [{ name: 'c', dtype: 'float32', dims: ['n', 2] }],
    })
    await store.save({ name: 'pair', version: '1.0.0', paths: [pair] })
    store.close()
    const runner = new OnnxRunner('cols', {
      home,
      batching: { batchDim: 1, maxBatchSize: 3, maxLatencyMs: 30_000 },
      resources: { cpu: 1 },
    })
    await runner.start()
    try {
      // Warm-up works out the per-row shape without the batch dimension: [3].
      assert.deepEqual(runner.effectiveConfig().warmup, { rounds: 1, sizes: [1, 2, 3], shapes: { x: [3] } })
      assert.equal(runner.effectiveConfig().workers, availableParallelism(), 'cpu: 1 → one worker per core')
      const cols = (n: number, base: number) => ({
        dtype: 'float32' as const,
        shape: [3, n],
        data: Float32Array.from({ length: 3 * n }, (_, i) => base + i),
      })
      const requests = [cols(2, 100), cols(2, 200), cols(1, 300)]
      const results = await Promise.all(requests.map((x) => runner.run({ x })))
      for (const [i, r] of results.entries()) {
        assert.deepEqual(r.y!.shape, requests[i]!.shape)
        assert.deepEqual(
          Array.from(r.y!.data as Float32Array),
          Array.from(requests[i]!.data),
          `request ${i} got its own columns`,
        )
      }
      await assert.rejects(
        runner.run({ x: { dtype: 'float32', shape: [6], data: new Float32Array(6) } }),
        (e: { code?: string; message: string }) =>
          e.code === 'E_INPUT_INVALID' && /no batch dimension 1/.test(e.message),
      )
    } finally {
      await runner.stop()
    }
    const add = new OnnxRunner('pair', { home, workers: 1 })
    await add.start()
    try {
      const t = (n: number) => ({ dtype: 'float32' as const, shape: [n, 2], data: new Float32Array(n * 2).fill(1) })
      assert.deepEqual(Array.from((await add.run({ a: t(2), b: t(2) })).c!.data as Float32Array), [2, 2, 2, 2])
      await assert.rejects(
        add.run({ a: t(2), b: t(3) }),
        (e: { code?: string; message: string }) =>
          e.code === 'E_INPUT_INVALID' && /"a" has 2, "b" has 3/.test(e.message),
      )
    } finally {
      await add.stop()
    }
  })
})

describe('OnnxRunner on GPUs', () => {
  it('a GPU runner without GPUs, or without onnxruntime CUDA binaries, fails start with a clear error', {
    timeout: 60_000,
  }, async () => {
    const home = await homeWithCls()
    const saved = process.env.BUNDLE_GPU_DEVICES
    try {
      process.env.BUNDLE_GPU_DEVICES = ''
      const none = new OnnxRunner('ocr-cls', { home, resources: { gpu: 1 } })
      await assert.rejects(
        none.start(),
        (e: { code?: string; message: string }) =>
          e.code === 'E_RUNNER_GPU_UNAVAILABLE' && /none was found/.test(e.message),
      )
      await none.stop()
      // A simulated device: placement succeeds, then this CPU-only onnxruntime cannot start CUDA.
      process.env.BUNDLE_GPU_DEVICES = '0'
      const noCuda = new OnnxRunner('ocr-cls', { home, resources: { gpu: 1 } })
      await assert.rejects(
        noCuda.start(),
        (e: { code?: string; message: string }) =>
          e.code === 'E_RUNNER_GPU_UNAVAILABLE' &&
          /ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install/.test(e.message),
      )
      await noCuda.stop()
    } finally {
      if (saved === undefined) delete process.env.BUNDLE_GPU_DEVICES
      else process.env.BUNDLE_GPU_DEVICES = saved
    }
  })
})
