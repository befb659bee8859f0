import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, customRunner, defineApi, defineService, io, onnxRunner } from '../../framework/index.js'
import { HotWait, hotWaitMs } from '../../runners/pool/hot-wait.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { runnerWorkers } from '../utils/procs.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

// A lone request crosses two processes twice, and each one it reaches was asleep. While the
// server has nothing else in flight, the worker of the runner a request will call stays awake from
// the request's arrival until the call lands (its body read and decoded meanwhile), and the API
// process stays awake for a short call's answer. Observed here by what matters: CPU time spent
// awake by the real worker process, and the loop turning in this one.

/** CPU time a process has used, ms (/proc, 10 ms ticks). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) * 10 // utime + stime
}

/** `start()` with BUNDLE_HOT_WAIT_MS=`hotMs` (the server reads it as it starts), then the variable as it was. */
async function startWithHotWait<T>(hotMs: string, start: () => Promise<T>): Promise<T> {
  const saved = process.env.BUNDLE_HOT_WAIT_MS
  process.env.BUNDLE_HOT_WAIT_MS = hotMs
  return start().finally(() => {
    if (saved === undefined) delete process.env.BUNDLE_HOT_WAIT_MS
    else process.env.BUNDLE_HOT_WAIT_MS = saved
  })
}

/**
 * The worker's CPU time across one lone request, with BUNDLE_HOT_WAIT_MS=`hotMs` while the server
 * starts: `first` teaches the server which runner is called, `lone` is the request measured.
 */
async function workerCpuDuring(
  hotMs: string,
  start: () => Promise<{ svc: { stop(): Promise<void> }; pid: number; first(): Promise<void>; lone(): Promise<void> }>,
): Promise<number> {
  const { svc, pid, first, lone } = await startWithHotWait(hotMs, start)
  try {
    await first()
    const before = cpuMs(pid)
    await lone()
    return cpuMs(pid) - before
  } finally {
    await svc.stop()
  }
}

describe('hotWaitMs (BUNDLE_HOT_WAIT_MS)', () => {
  it('is 10 ms unless set; 0 turns it off; anything else is a coded error naming the variable', () => {
    assert.equal(hotWaitMs({}), 10)
    assert.equal(hotWaitMs({ BUNDLE_HOT_WAIT_MS: '0' }), 0)
    assert.equal(hotWaitMs({ BUNDLE_HOT_WAIT_MS: '2.5' }), 2.5)
    for (const bad of ['-1', 'soon', '5000'])
      assert.throws(
        () => hotWaitMs({ BUNDLE_HOT_WAIT_MS: bad }),
        (e: { code?: string; message?: string }) =>
          e.code === 'E_SERVE_CONFIG_INVALID' && /BUNDLE_HOT_WAIT_MS/.test(e.message ?? ''),
      )
  })
})

describe('HotWait', () => {
  it('keeps the loop turning for the time held, and stops at release', async () => {
    const hot = new HotWait()
    const before = process.cpuUsage()
    hot.hold(300)
    assert.equal(hot.awake, true)
    await until('the hold to run out', () => !hot.awake, 10_000)
    const used = process.cpuUsage(before)
    // Awake ~300 ms with nothing else to do: most of it on the CPU (margin for a busy machine).
    assert.ok((used.user + used.system) / 1000 >= 60, `CPU while held: ${(used.user + used.system) / 1000} ms`)
    hot.hold(60_000)
    hot.release()
    await new Promise((r) => setImmediate(r))
    await new Promise((r) => setImmediate(r))
    assert.equal(hot.awake, false)
  })
})

describe('a lone request wakes the worker its API calls', () => {
  /** A service whose API spends `decodeMs` before calling its runner (as decoding a PNG does). */
  async function service(name: string, decodeMs: number, workers = 1) {
    const runner = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      { name, workers },
    )
    const def = defineService({
      name,
      runners: [runner],
      apis: {
        work: defineApi({
          input: io.json(z.object({ x: z.number() })),
          output: io.json(z.object({ x: z.number() })),
          handler: async ({ x }) => {
            await new Promise((r) => setTimeout(r, decodeMs))
            return { x: (await runner.call('echo', x)) as number }
          },
        }),
      },
    })
    const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
    await svc.start()
    const post = async (x: number) => {
      const r = await svc.app.request('/work', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ x }),
      })
      assert.equal(r.status, 200)
      return ((await r.json()) as { x: number }).x
    }
    const pids = runnerWorkers(name)
    assert.equal(pids.length, workers, `the worker processes of ${name}`)
    return { svc, post, pid: pids[0]!, pids }
  }

  /** The worker's CPU time across one lone request (the first one taught the server which runner its API calls). */
  const awakeDuring = (name: string, hotMs: string) =>
    workerCpuDuring(hotMs, async () => {
      const { svc, post, pid } = await service(name, 800)
      return {
        svc,
        pid,
        first: async () => assert.equal(await post(1), 1),
        lone: async () => assert.equal(await post(2), 2),
      }
    })

  it('stays awake through the API’s 800 ms before the call (up to BUNDLE_HOT_WAIT_MS), and not at all with 0', {
    timeout: 120_000,
  }, async () => {
    const awake = await awakeDuring('hot-on', '800')
    const asleep = await awakeDuring('hot-off', '0')
    // Up to 800 ms awake: at least 100 ms of CPU even with a third of a core; asleep, a few ms for the call.
    assert.ok(awake >= 100, `the worker's CPU during the request, awake: ${awake} ms`)
    assert.ok(asleep <= 40, `the worker's CPU during the request, off: ${asleep} ms`)
  })
  it('of two idle workers, wakes only the one the call goes to', { timeout: 120_000 }, async () => {
    const { svc, post, pids } = await startWithHotWait('800', () => service('hot-two', 800, 2))
    try {
      assert.equal(await post(1), 1)
      const before = pids.map(cpuMs)
      assert.equal(await post(2), 2)
      const used = pids.map((p, i) => cpuMs(p) - before[i]!).sort((a, b) => a - b)
      // One spun through the API's 800 ms; the other slept (a second awake one would take a core
      // the request's decoding or the model wants).
      assert.ok(used[1]! >= 100, `the woken worker's CPU: ${used}`)
      assert.ok(used[0]! <= 40, `the other worker's CPU: ${used}`)
    } finally {
      await svc.stop()
    }
  })
})

describe('a lone /v2 inference request wakes its model’s worker', () => {
  /** A served Identity model; `infer` sends the body `trickleMs` after the request's head. */
  async function served(name: string) {
    const dir = tempDir()
    const home = join(dir, 'home')
    const store = ModelStore.open({ home })
    const file = writeOnnxModel(join(dir, 'same.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 2] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 2] }],
    })
    await store.save({ name, version: '1.0.0', paths: [file] })
    store.close()
    const def = defineService({
      name: `${name}-svc`,
      runners: [onnxRunner(`${name}:1.0.0`, { home })],
      apis: {
        ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
      },
    })
    const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
    await svc.start()
    const infer = async (trickleMs: number) => {
      const body = new TextEncoder().encode(
        JSON.stringify({ inputs: [{ name: 'x', shape: [1, 2], datatype: 'FP32', data: [1, 2] }] }),
      )
      // The body arrives late, as a slow upload's does: the request is in flight, its call not yet made.
      const stream = new ReadableStream<Uint8Array>({
        start: (c) => {
          setTimeout(() => {
            c.enqueue(body)
            c.close()
          }, trickleMs)
        },
      })
      const r = await svc.app.request(`/v2/models/${name}/infer`, {
        method: 'POST',
        body: stream,
        headers: { 'content-type': 'application/json' },
        duplex: 'half',
      } as RequestInit)
      assert.equal(r.status, 200, await r.clone().text())
      return ((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data
    }
    const [pid] = runnerWorkers(name)
    assert.ok(pid !== undefined, `a worker process of ${name}`)
    return { svc, infer, pid: pid! }
  }

  const awakeDuring = (name: string, hotMs: string) =>
    workerCpuDuring(hotMs, async () => {
      const { svc, infer, pid } = await served(name)
      return {
        svc,
        pid,
        first: async () => assert.deepEqual(await infer(0), [1, 2]),
        lone: async () => assert.deepEqual(await infer(800), [1, 2]),
      }
    })

  it('stays awake while the body comes in (up to BUNDLE_HOT_WAIT_MS), and not at all with 0', {
    timeout: 120_000,
  }, async () => {
    const awake = await awakeDuring('v2hot-on', '800')
    const asleep = await awakeDuring('v2hot-off', '0')
    assert.ok(awake >= 100, `the worker's CPU during the request, awake: ${awake} ms`)
    assert.ok(asleep <= 40, `the worker's CPU during the request, off: ${asleep} ms`)
  })
})
