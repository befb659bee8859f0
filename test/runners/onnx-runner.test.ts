import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import ort from 'onnxruntime-node'
import { OnnxRunner } from '../../runners/onnx-runner.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir } from '../utils/tmp.js'

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
    const runner = new OnnxRunner('ocr-cls:latest', { home, workers: 1, batching: { maxBatchSize: 2, maxLatencyMs: 30_000 } })
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
        got.forEach((v, j) => assert.ok(Math.abs(v - expected[j]!) < 1e-4, `request ${i} value ${j}: ${v} vs ${expected[j]}`))
      }
    } finally {
      await runner.stop()
      await session.release()
    }
  })
})

describe('OnnxRunner on GPUs', () => {
  it('a GPU runner without GPUs, or without onnxruntime CUDA binaries, fails start with a clear error', { timeout: 60_000 }, async () => {
    const home = await homeWithCls()
    const saved = process.env.BUNDLE_GPU_DEVICES
    try {
      process.env.BUNDLE_GPU_DEVICES = ''
      const none = new OnnxRunner('ocr-cls', { home, resources: { gpu: 1 } })
      await assert.rejects(none.start(), (e: { code?: string; message: string }) => e.code === 'E_RUNNER_GPU_UNAVAILABLE' && /none was found/.test(e.message))
      await none.stop()
      // A simulated device: placement succeeds, then this CPU-only onnxruntime cannot start CUDA.
      process.env.BUNDLE_GPU_DEVICES = '0'
      const noCuda = new OnnxRunner('ocr-cls', { home, resources: { gpu: 1 } })
      await assert.rejects(noCuda.start(), (e: { code?: string; message: string }) => e.code === 'E_RUNNER_GPU_UNAVAILABLE' && /--onnxruntime-node-install=cuda12/.test(e.message))
      await noCuda.stop()
    } finally {
      if (saved === undefined) delete process.env.BUNDLE_GPU_DEVICES
      else process.env.BUNDLE_GPU_DEVICES = saved
    }
  })
})
