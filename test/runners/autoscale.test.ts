import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { OnnxRunner } from '../../runners/onnx-runner.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { runnerWorkers, until } from '../utils/procs.js'
import { tempDir } from '../utils/tmp.js'

const workers = (runner: string): number => runnerWorkers(runner).length

describe('worker autoscaling between minWorkers and maxWorkers (real processes)', () => {
  const home = join(tempDir(), 'home')
  it('a busy queue adds a worker; quiet removes it again; no request fails meanwhile', {
    timeout: 120_000,
  }, async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-cls', version: '1.0.0', paths: [MODELS.cls] })
    store.close()
    const runner = new OnnxRunner('ocr-cls', {
      name: 'scaler',
      home,
      minWorkers: 1,
      maxWorkers: 2,
      scaleIntervalMs: 300,
      batching: { enabled: false, maxLatencyMs: 60_000 },
      warmup: false,
    })
    await runner.start()
    try {
      assert.equal(runner.workerCount(), 1)
      assert.equal(workers('scaler'), 1)
      let stop = false
      let ok = 0
      let failed = 0
      const x = { dtype: 'float32' as const, shape: [1, 3, 48, 192], data: new Float32Array(3 * 48 * 192).fill(0.2) }
      const loop = async () => {
        while (!stop) {
          await runner.run({ x }).then(
            () => ok++,
            () => failed++,
          )
        }
      }
      const loops = Array.from({ length: 6 }, loop)
      await until('a second worker', () => runner.workerCount() === 2 && runner.ready())
      assert.equal(workers('scaler'), 2)
      const at = ok
      await until('requests on two workers', () => ok > at + 20)
      stop = true
      await Promise.all(loops)
      assert.equal(failed, 0)
      await until('back to one worker when quiet', () => runner.workerCount() === 1)
      await until('the retired worker process to exit', () => workers('scaler') === 1)
      assert.equal((await runner.run({ x })).constructor, Object, 'still serving')
    } finally {
      await runner.stop()
    }
  })
})
