import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { WorkerPool } from '../../runners/pool/worker-pool.js'
import { customBackend } from '../../runners/custom/protocol.js'
import type { GatheredTensor } from '../../runners/pool/protocol.js'
import { join } from 'node:path'
import ort from 'onnxruntime-node'
import { OnnxRunner } from '../../runners/onnx-runner.js'
import { customRunner } from '../../runners/custom-runner.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

const ECHO = fileURLToPath(new URL('../fixtures/echo-runner.ts', import.meta.url))
const pool = (extra: Partial<ConstructorParameters<typeof WorkerPool>[0]> = {}) =>
  new WorkerPool({
    runner: 'echo',
    workers: 2,
    isolation: 'thread',
    backend: customBackend({ module: ECHO, exportName: 'EchoRunner' }),
    backoffMs: { min: 50, max: 400 },
    ...extra,
  })

describe('WorkerPool with isolation: thread (real worker threads)', () => {
  it('runs calls in threads of this process; typed arrays cross; the process keeps its title', {
    timeout: 60_000,
  }, async () => {
    const p = pool()
    await p.start()
    try {
      assert.equal(p.kind, 'thread')
      assert.equal(p.ready(), true)
      assert.deepEqual(p.pids(), [process.pid, process.pid])
      const out = (await p.run('double', { data: new Float32Array([1, 2, 3]) })) as { data: Float32Array }
      assert.ok(out.data instanceof Float32Array)
      assert.deepEqual([...out.data], [2, 4, 6])
      assert.equal(await p.run('title', null), process.title, 'a thread must not rename the API process')
      await assert.rejects(p.run('fail', null), /the model said no/)
    } finally {
      await p.stop()
    }
  })

  it("a batch gathered from requests' bytes arrives whole, and the requests' own memory is left as it was", {
    timeout: 60_000,
  }, async () => {
    const p = pool({ workers: 1 })
    await p.start()
    try {
      // Two requests' rows living inside one larger buffer, as request bodies do in node's pool.
      const slab = new Uint8Array(64)
      slab.set([1, 2, 3, 4], 8)
      slab.set([5, 6, 7, 8], 40)
      const gathered: GatheredTensor = {
        dtype: 'uint8',
        shape: [2, 4],
        parts: [slab.subarray(8, 12), slab.subarray(40, 44)],
      }
      const single: GatheredTensor = { dtype: 'uint8', shape: [1, 4], parts: [slab.subarray(8, 12)] }
      const out = (await p.run('echo', { inputs: { x: gathered } })) as {
        inputs: { x: { shape: number[]; data: Uint8Array } }
      }
      assert.deepEqual(out.inputs.x.shape, [2, 4])
      assert.deepEqual([...out.inputs.x.data], [1, 2, 3, 4, 5, 6, 7, 8])
      const one = (await p.run('echo', { inputs: { x: single } })) as { inputs: { x: { data: Uint8Array } } }
      assert.deepEqual([...one.inputs.x.data], [1, 2, 3, 4])
      // Only buffers made for the call move to the thread: the slab is still whole here.
      assert.equal(slab.byteLength, 64)
      assert.deepEqual([...slab.subarray(8, 12)], [1, 2, 3, 4])
    } finally {
      await p.stop()
    }
  })

  it('a thread that exits fails its call at once with E_RUNNER_CRASHED, the other goes on, and it is restarted', {
    timeout: 60_000,
  }, async () => {
    const events: string[] = []
    const p = pool({ onEvent: (e) => events.push(e.type) })
    await p.start()
    try {
      const other = p.run('slow', 300)
      await assert.rejects(
        p.run('crash', null),
        (e: BundleError) => e.code === 'E_RUNNER_CRASHED' && /exited with code 3/.test(e.message),
      )
      assert.equal(await other, 300)
      await until('the thread restarted', () => p.ready() && p.restarts === 1)
      assert.deepEqual(events, ['crash', 'restart'])
      assert.deepEqual(
        [...((await p.run('double', { data: new Float32Array([5]) })) as { data: Float32Array }).data],
        [10],
      )
    } finally {
      await p.stop()
    }
  })

  it('a call past the timeout fails with E_RUNNER_TIMEOUT and its thread is replaced; stop() ends every thread', {
    timeout: 60_000,
  }, async () => {
    const p = pool({ workers: 1, timeoutMs: 200 })
    await p.start()
    await assert.rejects(p.run('slow', 5_000), (e: BundleError) => e.code === 'E_RUNNER_TIMEOUT')
    await until('the thread replaced', () => p.ready() && p.restarts === 1)
    assert.equal(await p.run('echo', 'after'), 'after')
    await p.stop()
    assert.deepEqual(p.pids(), [], 'no thread left running')
    await assert.rejects(p.run('echo', 1), (e: BundleError) => e.code === 'E_RUNNER_STOPPED')
  })
})

describe('OnnxRunner with isolation: thread (the real cls model)', () => {
  it('batched runs in a worker thread give what onnxruntime gives on its own', { timeout: 120_000 }, async () => {
    const home = join(tempDir(), 'home')
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-cls', version: '1.0.0', paths: [MODELS.cls] })
    store.close()
    const session = await ort.InferenceSession.create(MODELS.cls)
    const input = (rows: number, seed: number) => {
      const data = new Float32Array(rows * 3 * 48 * 192)
      for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.001 + seed)
      return { dtype: 'float32' as const, shape: [rows, 3, 48, 192], data }
    }
    const runner = new OnnxRunner('ocr-cls:latest', {
      home,
      workers: 1,
      isolation: 'thread',
      batching: { maxBatchSize: 4 },
    })
    await runner.start()
    try {
      const requests = [input(1, 1), input(2, 2), input(1, 3)]
      const results = await Promise.all(requests.map((x) => runner.run({ x })))
      for (const [i, r] of results.entries()) {
        const expected = Object.values(
          await session.run({ x: new ort.Tensor('float32', requests[i]!.data, requests[i]!.shape) }),
        )[0]!.data as Float32Array
        const got = Object.values(r)[0]!
        assert.deepEqual(got.shape, [requests[i]!.shape[0], 2])
        for (const [j, v] of (got.data as Float32Array).entries())
          assert.ok(Math.abs(v - expected[j]!) < 1e-5, `request ${i} value ${j}: ${v} vs ${expected[j]}`)
      }
      // The caller's tensors are still whole: only buffers made for the batch moved.
      assert.equal(requests[0]!.data.length, 3 * 48 * 192)
      assert.equal((runner.effectiveConfig() as { isolation?: string }).isolation, 'thread')
    } finally {
      await runner.stop()
    }
  })
})

describe('CustomRunner with isolation: thread', () => {
  it('batches a batchable method in a worker thread and says where it runs', { timeout: 60_000 }, async () => {
    const runner = customRunner(
      { module: ECHO, export: 'EchoRunner' },
      { name: 'echo-thread', isolation: 'thread', methods: { upper: { batchable: true, maxDelayMs: 50 } } },
    )
    await runner.start()
    try {
      const out = await Promise.all([
        runner.batch<string, string>('upper', ['a']),
        runner.batch<string, string>('upper', ['b', 'c']),
      ])
      // One batch of three items, in the thread: each item says how big its batch was.
      assert.deepEqual(
        out.flat().map((s) => s.split('/')[0]),
        ['A', 'B', 'C'],
      )
      assert.equal(await runner.call('title'), process.title)
      assert.equal(runner.effectiveConfig().isolation, 'thread')
      assert.equal(runner.health().workers, 1)
    } finally {
      await runner.stop()
    }
  })
})
