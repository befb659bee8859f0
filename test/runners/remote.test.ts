// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundle, BIN } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import {
  freePort,
  type PrivateRedis,
  usePrivateRedis,
  remoteServe,
  startWorker,
  until,
  worker,
  workerReady,
  double,
  post,
} from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

// Remote runners on a real redis-server (one of the test's own, so it can stop it) and real
// processes on loopback: API servers form batches, `bundle worker` processes run them.

const SERVICE = fileURLToPath(new URL('../fixtures/remote-service.ts', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))

async function readyz(url: string): Promise<{ status: number; reason: string }> {
  const r = await fetch(`${url}/readyz`)
  return { status: r.status, reason: ((await r.json()) as { reason?: string }).reason ?? '' }
}

describe('remote runners: batches over Redis (BullMQ) to bundle worker processes', () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))

  it('the quickstart model through a remote worker answers exactly what it answers locally', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    assert.equal(
      (await bundle(['models', 'save', MODELS.cls, '--name', 'ocr-cls', '--version', '2.0.0'], { BUNDLE_HOME: home }))
        .code,
      0,
    )
    const env = { BUNDLE_HOME: home }
    const w = track(await worker(QUICKSTART, redis.url, env))
    const api = track(await remoteServe(QUICKSTART, redis.url, env))
    await until('remote API ready', async () => (await fetch(`${api.url}/readyz`)).status === 200)
    const port = await freePort()
    const local = track({
      ...(await (async () => {
        const child = spawn(process.execPath, [BIN, 'serve', QUICKSTART, '--port', String(port)], {
          env: { ...process.env, ...env, BUNDLE_ACCESS_LOG: '0' },
          stdio: 'ignore',
        })
        const exited = new Promise<void>((r) => child.once('exit', () => r()))
        return {
          child,
          output: () => '',
          stop: async (s: NodeJS.Signals = 'SIGTERM') => void (child.kill(s), await exited),
        }
      })()),
    })
    const localUrl = `http://127.0.0.1:${port}`
    await until(
      'local API ready',
      async () => (await fetch(`${localUrl}/readyz`).catch(() => undefined))?.status === 200,
      60_000,
    )
    // Raw float32 through /v2 with a binary answer: the bytes must match exactly.
    const x = new Float32Array(3 * 3 * 48 * 192).map((_, i) => Math.sin(i))
    const infer = async (base: string) => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            { name: 'x', shape: [3, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
          ],
          parameters: { binary_data_output: true },
        }),
      )
      const r = await fetch(`${base}/v2/models/ocr-cls/infer`, {
        method: 'POST',
        headers: { 'inference-header-content-length': String(header.byteLength) },
        body: Buffer.concat([header, Buffer.from(x.buffer)]),
      })
      assert.equal(r.status, 200)
      const body = Buffer.from(await r.arrayBuffer())
      return body.subarray(Number(r.headers.get('inference-header-content-length')))
    }
    assert.ok((await infer(api.url)).equals(await infer(localUrl)), 'identical output bytes')
    const png = readFileSync(new URL('../fixtures/images/hello-180.png', import.meta.url))
    const r = await fetch(`${api.url}/classify`, {
      method: 'POST',
      headers: { 'content-type': 'image/png' },
      body: png,
    })
    assert.equal(((await r.json()) as { angle: number }).angle, 180)
    // The API server ran no model process of its own; the worker did.
    const metrics = await (await fetch(`${api.url}/metrics`)).text()
    assert.match(metrics, /bundle_runner_remote_workers\{service="[^"]+",runner="ocr-cls"\} 1/)
    await Promise.all([api.stop(), w.stop(), local.stop()])
    // A worker says when it is told to stop and when it has (an operator sees a drain, not silence).
    assert.match(w.output(), /"signal":"SIGTERM".*"msg":"SIGTERM: finishing the batches held, then exiting"/)
    assert.match(w.output(), /"msg":"worker stopped"/)
  })

  it('the API server batches; a batch travels as one job; workers join and share the queue', {
    timeout: 120_000,
  }, async () => {
    const log = join(tempDir(), 'exec.log')
    writeFileSync(log, '')
    const env = { ACCEL_DELAY_MS: '200', ACCEL_LOG: log }
    const w1 = track(await worker(SERVICE, redis.url, env))
    const api = track(await remoteServe(SERVICE, redis.url, env))
    await until('ready', async () => (await fetch(`${api.url}/readyz`)).status === 200)
    const first = await Promise.all(Array.from({ length: 12 }, (_, i) => double(api.url, i)))
    assert.deepEqual(
      first.map((a) => a.status),
      new Array(12).fill(200),
    )
    assert.deepEqual(
      first.map((a) => a.body.y),
      Array.from({ length: 12 }, (_, i) => 2 * i),
    )
    assert.ok(
      first.some((a) => a.body.batch > 1),
      `requests shared batches: ${first.map((a) => a.body.batch)}`,
    )
    const batches = readFileSync(log, 'utf8').trim().split('\n')
    assert.equal(batches.flatMap((l) => l.split(' ')[1]!.split(',')).length, 12, 'every item ran exactly once')
    assert.ok(batches.length < 12)
    // A second worker joins: the API server sees it and sends batches to both at once.
    const w2 = track(await worker(SERVICE, redis.url, env))
    await until('two workers', async () =>
      /bundle_runner_remote_workers\{service="[^"]+",runner="accel"\} 2/.test(
        await (await fetch(`${api.url}/metrics`)).text(),
      ),
    )
    const second = await Promise.all(Array.from({ length: 48 }, (_, i) => double(api.url, i)))
    assert.ok(second.every((a) => a.status === 200))
    assert.equal(new Set(second.map((a) => a.body.pid)).size, 2, 'both workers ran batches')
    await Promise.all([api.stop(), w1.stop(), w2.stop()])
  })

  it('a worker SIGKILLed mid-batch: its batch runs on another worker, every request answers once', {
    timeout: 120_000,
  }, async () => {
    const log = join(tempDir(), 'exec.log')
    writeFileSync(log, '')
    const env = { ACCEL_DELAY_MS: '400', ACCEL_LOG: log, ACCEL_TIMEOUT_MS: '20000' }
    const w1 = track(await worker(SERVICE, redis.url, env))
    const w2 = track(await worker(SERVICE, redis.url, env))
    const api = track(await remoteServe(SERVICE, redis.url, env))
    await until('ready', async () => (await fetch(`${api.url}/readyz`)).status === 200)
    await until('two workers', async () =>
      /bundle_runner_remote_workers\{service="[^"]+",runner="accel"\} 2/.test(
        await (await fetch(`${api.url}/metrics`)).text(),
      ),
    )
    const answers = Array.from({ length: 40 }, (_, i) => double(api.url, i))
    // Kill one worker while both hold batches (each batch takes 400 ms). A fixed wait on purpose: a kill that
    // lands earlier or later on a busy machine changes which items repeat, not what is asserted.
    await new Promise((r) => setTimeout(r, 250))
    process.kill(w1.child.pid!, 'SIGKILL')
    const all = await Promise.all(answers)
    assert.deepEqual(
      all.map((a) => a.status),
      new Array(40).fill(200),
      JSON.stringify(all.filter((a) => a.status !== 200).map((a) => a.body)),
    )
    assert.deepEqual(
      all.map((a) => a.body.y),
      Array.from({ length: 40 }, (_, i) => 2 * i),
    )
    assert.ok(
      all.every((a) => a.ms < 20_000),
      'within the deadline',
    )
    // The survivor ran what the dead worker held: some items appear twice in the log (started, never answered), none is
    // missing.
    const ran = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .flatMap((l) => l.split(' ')[1]!.split(',').map(Number))
    for (let i = 0; i < 40; i++) assert.ok(ran.includes(i), `item ${i} ran`)
    await Promise.all([api.stop(), w2.stop(), w1.stop()])
  })

  it('a batch nobody waits for any more is not run; with a grace longer than the deadline, requests fail with 503 ' +
    'at their deadline', {
    timeout: 120_000,
  }, async () => {
    const log = join(tempDir(), 'exec.log')
    writeFileSync(log, '')
    const env = { ACCEL_DELAY_MS: '10', ACCEL_LOG: log, ACCEL_TIMEOUT_MS: '1500', BUNDLE_REMOTE_GRACE_MS: '60000' }
    const api = track(await remoteServe(SERVICE, redis.url, env))
    // Started, not ready: no worker yet.
    await until('started', async () => /no live remote worker/.test((await readyz(api.url)).reason))
    const gaveUp = await Promise.all([1, 2, 3].map((x) => double(api.url, x)))
    for (const a of gaveUp) {
      assert.equal(a.status, 503)
      assert.equal(a.body.error.code, 'E_REMOTE_NO_WORKERS')
      assert.ok(a.ms < 5_000, `failed at its deadline, not later: ${a.ms} ms`)
    }
    const w = track(await worker(SERVICE, redis.url, env))
    await until('ready', async () => (await readyz(api.url)).status === 200)
    const fresh = await double(api.url, 7)
    assert.equal(fresh.status, 200)
    // A fixed wait on purpose: the stale batch must NOT run (it was queued before 7, so it would have run first).
    await new Promise((r) => setTimeout(r, 500))
    assert.deepEqual(
      readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ')[1]),
      ['7'],
      'the stale batch was skipped',
    )
    await Promise.all([api.stop(), w.stop()])
  })

  it('no live worker: /readyz says so, requests fail after the grace with 503 E_REMOTE_NO_WORKERS and ' +
    'Retry-After; batches queued when the last worker leaves fail too and never run', {
    timeout: 120_000,
  }, async () => {
    const log = join(tempDir(), 'exec.log')
    writeFileSync(log, '')
    // A timeout far beyond the grace: what fails early is the grace, not the deadline.
    const env = { ACCEL_DELAY_MS: '10', ACCEL_LOG: log, ACCEL_TIMEOUT_MS: '60000', ACCEL_LATENCY_MS: '60000' }
    const api = track(await remoteServe(SERVICE, redis.url, env))
    let state = { status: 0, reason: '' }
    await until('started', async () => (state = await readyz(api.url)).reason !== 'starting up')
    assert.equal(state.status, 503)
    assert.match(
      state.reason,
      /^runner accel \(no live remote worker for queue remote-test[^ ]*\.accel\) is not ready$/,
    )
    // The default grace (2 s), not the 60 s timeout.
    const none = await double(api.url, 1)
    assert.equal(none.status, 503)
    assert.equal(none.body.error.code, 'E_REMOTE_NO_WORKERS')
    assert.equal(none.retryAfter, '1', 'a retryable 503 carries Retry-After')
    assert.ok(none.ms > 1_500 && none.ms < 10_000, `failed after the grace: ${none.ms} ms`)
    // --remote-grace 0: at once.
    const eager = track(await remoteServe(SERVICE, redis.url, env, ['--remote-grace', '0']))
    await until('started', async () => /no live remote worker/.test((await readyz(eager.url)).reason))
    const now = await double(eager.url, 1)
    assert.equal(now.body.error?.code, 'E_REMOTE_NO_WORKERS')
    assert.ok(now.ms < 1_000, `no grace: ${now.ms} ms`)
    await eager.stop()
    // A worker's heartbeat makes it ready.
    const w = track(await worker(SERVICE, redis.url, env))
    await until('ready', async () => (await readyz(api.url)).status === 200)
    assert.equal((await double(api.url, 2)).status, 200)
    // The last worker dies: batches sent while its heartbeat has not yet lapsed wait in the
    // queue; they fail after the lapse (3 s) and the grace, not at the timeout. (One batch at a
    // time, as the one worker took: the first fails after the lapse and the grace, the next
    // ones after the grace.)
    await w.stop('SIGKILL')
    const orphans = await Promise.all([3, 4, 5].map((x) => double(api.url, x)))
    for (const a of orphans) {
      assert.equal(a.status, 503, JSON.stringify(a.body))
      assert.equal(a.body.error.code, 'E_REMOTE_NO_WORKERS')
      assert.ok(a.ms < 25_000, `failed after the grace, not at the 60 s timeout: ${a.ms} ms`)
    }
    assert.match((await readyz(api.url)).reason, /no live remote worker/)
    // They left the queue: a worker that comes later runs none of them.
    const w2 = track(await worker(SERVICE, redis.url, env))
    await until('ready again', async () => (await readyz(api.url)).status === 200)
    assert.equal((await double(api.url, 6)).status, 200)
    // A fixed wait on purpose: the abandoned batches must NOT run (queued before 6, they would have run first).
    await new Promise((r) => setTimeout(r, 500))
    assert.deepEqual(
      readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ')[1]),
      ['2', '6'],
      'the abandoned batches never ran',
    )
    await Promise.all([api.stop(), w2.stop()])
  })

  it('workers that scale to zero (BUNDLE_REMOTE_SCALE_TO_ZERO): ready with none; a batch waits in the queue, ' +
    'counted on /metrics, until a worker starts or its deadline passes', {
    timeout: 120_000,
  }, async () => {
    const log = join(tempDir(), 'exec.log')
    writeFileSync(log, '')
    const env = { ACCEL_DELAY_MS: '10', ACCEL_LOG: log, ACCEL_TIMEOUT_MS: '60000', BUNDLE_REMOTE_SCALE_TO_ZERO: '1' }
    const api = track(await remoteServe(SERVICE, redis.url, env))
    await until('ready with no worker', async () => (await readyz(api.url)).status === 200)
    const waiting = double(api.url, 7)
    // The batch waits in Redis (its depth on /metrics, for a dashboard).
    const depth = async () => {
      const text = await (await fetch(`${api.url}/metrics`)).text()
      return Number(/^bundle_runner_remote_queue_depth\{[^}]*runner="accel"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0)
    }
    await until('the batch counted as waiting', async () => (await depth()) >= 1)
    // The workers it needs, what an autoscaler wakes them on: one while the batch waits, even once the
    // rows it came with have left the 10 s window of offered rows.
    const desired = async () => {
      const text = await (await fetch(`${api.url}/metrics`)).text()
      return Number(/^bundle_runner_desired_workers\{[^}]*runner="accel"[^}]*\} (\S+)/m.exec(text)?.[1])
    }
    assert.equal(await desired(), 1)
    await new Promise((r) => setTimeout(r, 11_000))
    assert.equal(await desired(), 1, 'still needed 11 s on')
    const w = track(await worker(SERVICE, redis.url, env))
    const answered = await waiting
    assert.equal(answered.status, 200, JSON.stringify(answered.body))
    assert.ok(answered.ms > 11_000, `it waited for the worker: ${answered.ms} ms`)
    // Its 11 s in Redis were not the batch's time: a trickle of rows needs a sliver of a worker that
    // runs a batch in ~10 ms (timed from the wait, the batch would say one worker does 1 row in 11 s).
    for (let x = 0; x < 3; x++) assert.equal((await double(api.url, x)).status, 200)
    const trickle = await desired()
    assert.ok(trickle < 0.5, `a trickle needs a fraction of a worker: ${trickle}`)
    await until('the queue drained', async () => (await depth()) === 0)
    await w.stop()
    // With no worker at all, a request waits until its deadline (4 s here), not the 2 s grace.
    const short = track(await remoteServe(SERVICE, redis.url, { ...env, ACCEL_TIMEOUT_MS: '4000' }))
    await until('ready with no worker', async () => (await readyz(short.url)).status === 200)
    const late = await double(short.url, 8)
    assert.equal(late.status, 503)
    assert.equal(late.body.error.code, 'E_REMOTE_NO_WORKERS')
    assert.ok(late.ms > 3_500, `waited for its deadline: ${late.ms} ms`)
    await Promise.all([api.stop(), short.stop()])
  })

  it('--remote-grace and BUNDLE_REMOTE_GRACE_MS are checked', { timeout: 60_000 }, async () => {
    const bad = await bundle(['serve', SERVICE, '--runners', 'remote', '--redis', redis.url, '--remote-grace', '-1'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--remote-grace "-1" must be a whole number ≥ 0/)
    const env = await bundle(['serve', SERVICE, '--runners', 'remote', '--redis', redis.url], {
      BUNDLE_REMOTE_GRACE_MS: '2s',
    })
    assert.equal(env.code, 2)
    assert.match(env.stderr, /BUNDLE_REMOTE_GRACE_MS "2s" must be a whole number ≥ 0/)
    const local = await bundle(['serve', SERVICE, '--remote-grace', '100'])
    assert.equal(local.code, 2)
    assert.match(local.stderr, /--remote-grace applies to remote runners/)
    const zeroLocal = await bundle(['serve', SERVICE, '--remote-scale-to-zero'])
    assert.equal(zeroLocal.code, 2)
    assert.match(zeroLocal.stderr, /--remote-scale-to-zero applies to remote runners/)
    const both = await bundle([
      'serve',
      SERVICE,
      '--runners',
      'remote',
      '--redis',
      redis.url,
      '--remote-scale-to-zero',
      '--remote-grace',
      '100',
    ])
    assert.equal(both.code, 2)
    assert.match(both.stderr, /--remote-scale-to-zero and --remote-grace: .* give one of them/)
  })

  it('workers started with the API server take no batch before their connections are up: the first requests all ' +
    'answer', {
    timeout: 120_000,
  }, async () => {
    // Batches too large to ride inline: a worker reads them from Redis on its command connection.
    const env = { ACCEL_DELAY_MS: '10', ACCEL_TIMEOUT_MS: '30000', BUNDLE_REMOTE_GRACE_MS: '60000' }
    const api = track(await remoteServe(SERVICE, redis.url, env))
    await until('started', async () => {
      const r = await readyz(api.url)
      return r.status === 200 || /no live remote worker/.test(r.reason)
    })
    const total = (i: number) => post(`${api.url}/total`, { n: 20_000, v: i })
    // Requests already waiting in the queue when two workers start at the same moment: each
    // worker takes one the instant it can.
    const early = Array.from({ length: 6 }, (_, i) => total(i + 1))
    const ws = [startWorker(SERVICE, redis.url, env), startWorker(SERVICE, redis.url, env)].map(track)
    // And the first requests once /readyz says ready.
    await until('ready', async () => (await readyz(api.url)).status === 200, 60_000)
    const first = Array.from({ length: 6 }, (_, i) => total(i + 7))
    const all = await Promise.all([...early, ...first])
    assert.deepEqual(
      all.map((a) => a.status),
      new Array(12).fill(200),
      JSON.stringify(all.filter((a) => a.status !== 200).map((a) => a.body)),
    )
    assert.deepEqual(
      all.map((a) => a.body.total),
      Array.from({ length: 12 }, (_, i) => 20_000 * (i + 1)),
    )
    await Promise.all(ws.map(workerReady))
    await Promise.all([api.stop(), ...ws.map((w) => w.stop())])
  })
})
