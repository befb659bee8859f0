import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { generateKeys, ModelStore, signModel } from '../../store/index.js'
import { bundle } from '../utils/cli.js'
import {
  type PrivateRedis,
  type Proc,
  post,
  remoteModelServe,
  startModelWorker,
  until,
  usePrivateRedis,
  workerReady,
} from '../utils/remote.js'
import { writeSizedModels } from '../utils/sized-models.js'
import { tempDir } from '../utils/tmp.js'

// The store's models on remote workers under a memory budget: `bundle serve --models '*' --runners
// remote` forms each model's batches, `bundle worker --models '*' --memory-budget` loads a model
// when a batch for it arrives, evicts the least recently used idle ones, and reports what it holds,
// which the API server's repository index shows. Real redis-server, real processes, real models.

const MiB = 1024 ** 2
const MB = 1e6

describe("bundle worker --models: the store's models under a memory budget on remote workers", () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))
  const dir = tempDir()
  const home = join(dir, 'home')
  const env = { BUNDLE_HOME: home }
  const models = writeSizedModels(dir, 6, 6 * MB, 6 * MB)
  const infer = (url: string, k: number) =>
    post(`${url}/v2/models/m${k}/infer`, {
      inputs: [{ name: 'x', shape: [1, 8], datatype: 'FP32', data: Array(8).fill(1) }],
    })
  /** The worker's log line that says what its budget leaves for models. */
  const budgetLine = (p: Proc) => {
    const line = p
      .output()
      .split('\n')
      .find((l) => l.includes('models available under the memory budget'))
    return JSON.parse(line!) as { fixedBytes: number; capacityBytes: number }
  }
  const holdings = async () => {
    const r = new Redis(redis.url)
    try {
      return Object.values(await r.hgetall('mb:holdings:models')).map((v) => JSON.parse(v)) as {
        worker: string
        capacityBytes: number
        usedBytes: number
        loads: number
        evictions: number
        models: { name: string; state: string; bytes?: number }[]
      }[]
    } finally {
      r.disconnect()
    }
  }

  it('loads each model for its batch, answers with the right model, evicts to stay in budget, reports what it holds', {
    timeout: 240_000,
  }, async () => {
    const store = ModelStore.open({ home })
    for (const [i, m] of models.entries()) await store.save({ name: `m${i}`, version: '1', paths: [m.path] })
    store.close()
    // A first worker measures what the worker holds before any model; the real one gets that plus ~3 models.
    const probe = startModelWorker('*', redis.url, env, ['--memory-budget', '64GiB'])
    await workerReady(probe)
    const fixed = budgetLine(probe).fixedBytes
    await probe.stop()
    const w = track(startModelWorker('*', redis.url, env, ['--memory-budget', String(fixed + 24 * MiB)]))
    await workerReady(w)
    const capacity = budgetLine(w).capacityBytes
    const api = track(await remoteModelServe('*', redis.url, env))
    await until('remote API ready', async () => (await fetch(`${api.url}/readyz`)).status === 200, 60_000)

    for (let k = 0; k < 6; k++) {
      const r = await infer(api.url, k)
      assert.equal(r.status, 200, JSON.stringify(r.body))
      assert.ok(Math.abs(r.body.outputs[0].data[0] - (1 + k)) < 0.01, `m${k} answered ${r.body.outputs[0].data}`)
    }
    // The report is rewritten every second: wait for one that has seen all six loads.
    await until('the worker reports six loads', async () => (await holdings())[0]?.loads === 6, 10_000)
    const [report] = await holdings()
    assert.equal(report!.capacityBytes, capacity)
    assert.ok(report!.usedBytes <= capacity, `${report!.usedBytes} held, capacity ${capacity}`)
    assert.ok(report!.evictions >= 1, 'six 6 MB models in ~24 MiB: some were evicted')
    const held = report!.models.filter((m) => m.state === 'loaded').map((m) => m.name)
    assert.ok(held.includes('m5'), `the last model used is held: ${held}`)
    assert.ok(held.length < 6 && held.length >= 1, `held: ${held}`)

    // A model still held answers without a load.
    assert.equal((await infer(api.url, 5)).status, 200)
    await until(
      'the next report',
      async () => (await holdings())[0]?.models.some((m) => m.name === 'm5') === true,
      5_000,
    )
    assert.equal((await holdings())[0]!.loads, 6)

    // The API server's index and `bundle models loaded` say which worker holds what (read each second).
    const readIndex = async () =>
      (await post(`${api.url}/v2/repository/index`, {})).body as {
        name: string
        state: string
        held_by?: string[]
        size_bytes?: number
      }[]
    await until('the API server reads the report', async () =>
      (await readIndex()).some((r) => r.name === 'm5' && r.held_by?.length === 1),
    )
    const index = await readIndex()
    const m5 = index.find((r) => r.name === 'm5')!
    assert.equal(m5.state, 'READY')
    assert.deepEqual(m5.held_by, [report!.worker])
    assert.ok(m5.size_bytes! > 5 * MB, `size ${m5.size_bytes}`)
    const evicted = index.find((r) => r.name !== 'm5' && !held.includes(r.name))!
    assert.deepEqual(evicted.held_by, [])
    const table = await bundle(['models', 'loaded', '--url', api.url], env)
    assert.equal(table.code, 0, table.stderr)
    assert.match(table.stdout, /Held by/)
    assert.match(table.stdout, new RegExp(`m5\\s+1\\s+READY\\s+[\\d.]+ MiB\\s+\\S+ \\S+\\s+${report!.worker}`))

    // A worker that stops takes its report with it.
    await w.stop()
    await until('the report is gone', async () => (await holdings()).length === 0, 10_000)
  })

  it('with --trust a worker refuses the unsigned model, names why, and serves the signed one', {
    timeout: 120_000,
  }, async () => {
    const home2 = join(dir, 'home-trust')
    const env2 = { BUNDLE_HOME: home2 }
    const store = ModelStore.open({ home: home2 })
    for (const [i, m] of models.slice(0, 2).entries())
      await store.save({ name: `t${i}`, version: '1', paths: [m.path] })
    const keys = generateKeys(join(dir, 'trust-keys'))
    await signModel(store, 't0', keys.privateKey)
    store.close()
    const w = track(startModelWorker('t*', redis.url, env2, ['--trust', keys.publicKey]))
    await workerReady(w)
    assert.match(w.output(), /"model":"t1".*E_SIG_UNSIGNED|model t1: the model has no signature/)
    const api = track(await remoteModelServe('t0', redis.url, env2))
    await until('remote API ready', async () => (await fetch(`${api.url}/readyz`)).status === 200, 60_000)
    const r = await post(`${api.url}/v2/models/t0/infer`, {
      inputs: [{ name: 'x', shape: [1, 8], datatype: 'FP32', data: Array(8).fill(1) }],
    })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    await w.stop()
  })

  it('refuses a budget where it cannot apply, each with its reason', { timeout: 120_000 }, async () => {
    const serve = await bundle(
      ['serve', '--models', '*', '--runners', 'remote', '--redis', redis.url, '--memory-budget', '1GiB', '--port', '0'],
      env,
    )
    assert.equal(serve.code, 2, serve.stderr)
    assert.match(serve.stderr, /E_CLI_USAGE: with --runners remote the models live on the workers/)
    const nothing = await bundle(['worker', '--redis', redis.url], env)
    assert.equal(nothing.code, 2)
    assert.match(nothing.stderr, /E_CLI_USAGE: bundle worker needs what to run/)
    const both = await bundle(
      ['worker', 'examples/greeter/service.ts', '--memory-budget', '1GiB', '--redis', redis.url],
      env,
    )
    assert.equal(both.code, 2)
    assert.match(both.stderr, /--memory-budget bounds the models --models names/)
  })
})
