import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { RedisLink, RemotePool, serveQueue } from '../../runners/index.js'
import { bundle } from '../utils/cli.js'
import { double, type PrivateRedis, usePrivateRedis, remoteServe, until, worker } from '../utils/remote.js'

// Remote runners when things break: Redis stopped, unreachable or lost mid-batch, workers on
// another model version. A real redis-server of the test's own, so it can stop it, and real
// processes on loopback.

const SERVICE = fileURLToPath(new URL('../fixtures/remote-service.ts', import.meta.url))

describe('remote runners: Redis and worker faults', () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))

  it('Redis stopped and restarted under load: fast 503s, /readyz says why, service resumes by itself, nothing hangs', {
    timeout: 120_000,
  }, async () => {
    const env = { ACCEL_DELAY_MS: '20' }
    const w = track(await worker(SERVICE, redis.url, env))
    const api = track(await remoteServe(SERVICE, redis.url, env))
    await until('ready', async () => (await fetch(`${api.url}/readyz`)).status === 200)
    const seen: { status: number; code?: string; ms: number; at: number }[] = []
    let running = true
    const loop = async (k: number) => {
      for (let i = 0; running; i++) {
        const a = await double(api.url, k * 1000 + i)
        seen.push({ status: a.status, code: a.body.error?.code, ms: a.ms, at: Date.now() })
        if (a.status !== 200) await new Promise((r) => setTimeout(r, 20)) // pacing: no busy loop of fast 503s
      }
    }
    const loops = [0, 1, 2, 3].map(loop)
    await until('traffic flows', () => seen.filter((s) => s.status === 200).length >= 20)
    const stopped = Date.now()
    await redis.stop()
    await until('not ready', async () => (await fetch(`${api.url}/readyz`)).status === 503, 10_000)
    const ready = (await (await fetch(`${api.url}/readyz`)).json()) as { reason: string }
    assert.match(
      ready.reason,
      /runner accel \(Redis at redis:\/\/127\.0\.0\.1:\d+ (is unreachable|closed the connection)/,
    )
    // A fixed wait on purpose: the outage the test measures (503s in it, then recovery) lasts this long.
    await new Promise((r) => setTimeout(r, 1_500))
    const restarted = Date.now()
    await redis.start()
    await until('ready again', async () => (await fetch(`${api.url}/readyz`)).status === 200, 30_000)
    await until('answers again', () => seen.some((s) => s.at > restarted && s.status === 200), 30_000)
    running = false
    await Promise.all(loops)
    const during = seen.filter((s) => s.at > stopped + 200 && s.at < restarted)
    assert.ok(
      during.length > 0 && during.every((s) => s.status === 503),
      `during the outage: ${JSON.stringify(during.slice(0, 3))}`,
    )
    assert.ok(
      during.every((s) => ['E_REMOTE_UNAVAILABLE', 'E_HTTP_NOT_READY'].includes(s.code!)),
      [...new Set(during.map((s) => s.code))].join(','),
    )
    assert.ok(
      during.every((s) => s.ms < 1_000),
      `503s are fast: slowest ${Math.max(...during.map((s) => s.ms))} ms`,
    )
    assert.ok(
      seen.every((s) => s.status === 200 || s.status === 503),
      [...new Set(seen.map((s) => s.status))].join(','),
    )
    assert.ok(
      seen.every((s) => s.ms < 12_000),
      'no request hung',
    )
    const back = await Promise.all([4, 5, 6].map((x) => double(api.url, x)))
    assert.deepEqual(
      back.map((a) => a.body.y),
      [8, 10, 12],
    )
    await Promise.all([api.stop(), w.stop()])
  })

  it('started while Redis is unreachable: serves /livez, not ready with the reason, API calls fail fast', {
    timeout: 60_000,
  }, async () => {
    const api = track(await remoteServe(SERVICE, 'redis://127.0.0.1:1', {}))
    // Start-up waits a few seconds for Redis, then the server runs, not ready, saying why.
    let reason = ''
    await until('the reason', async () => {
      const ready = await fetch(`${api.url}/readyz`)
      assert.equal(ready.status, 503)
      reason = ((await ready.json()) as { reason: string }).reason
      return reason !== 'starting up'
    })
    assert.match(reason, /runner accel \(Redis at redis:\/\/127\.0\.0\.1:1 is unreachable/)
    const a = await double(api.url, 1)
    assert.equal(a.status, 503)
    assert.ok(a.ms < 1_000)
    await api.stop()
    const bad = await bundle(['worker', SERVICE, '--runner', 'nope', '--redis', redis.url])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--runner nope: remote-test has no such runner \(runners: accel\)/)
    const noRedis = await bundle(['serve', SERVICE, '--runners', 'remote'], { BUNDLE_REDIS_URL: '' })
    assert.equal(noRedis.code, 2)
    assert.match(noRedis.stderr, /needs Redis: pass --redis/)
  })

  it('a worker running another model version refuses the batch; API servers split the workers between them', {
    timeout: 60_000,
  }, async () => {
    const link = new RedisLink(redis.url, 'mbtest')
    const served = await serveQueue({
      link,
      queue: 'mm.run',
      runner: { name: 'm', execute: async () => 'ran', digest: () => 'sha256:bbbb' },
      concurrency: 4,
    })
    const slots: number[][] = [[], []]
    const pools = [0, 1].map(
      (i) =>
        new RemotePool({
          link,
          queue: 'mm.run',
          runner: 'm',
          timeoutMs: 5_000,
          digest: 'sha256:aaaa',
          onCapacity: (n) => slots[i]!.push(n),
        }),
    )
    await Promise.all(pools.map((p) => p.start()))
    await assert.rejects(
      pools[0]!.run('run', {}),
      (err: any) => err.code === 'E_REMOTE_MODEL_MISMATCH' && /this worker runs sha256:bbbb/.test(err.message),
    )
    // Two API servers, one worker taking 4 at once: each sends 2 at a time.
    await until('shares', () => slots.every((s) => s.at(-1) === 2), 10_000)
    const same = new RemotePool({ link, queue: 'mm.run', runner: 'm', timeoutMs: 5_000, digest: 'sha256:bbbb' })
    await same.start()
    assert.equal(await same.run('run', {}), 'ran')
    await Promise.all([...pools, same].map((p) => p.stop()))
    await served.close()
    await link.close()
  })

  it('a batch whose worker loses Redis while moving it goes back to the queue and runs on another worker', {
    timeout: 60_000,
  }, async () => {
    const [api, a, b] = [0, 1, 2].map(() => new RedisLink(redis.url, 'mbtest'))
    const queue = `tr${process.pid}.run`
    // Results this large are stored in a key of their own, on the command connection.
    const big = new Float32Array(40_000).fill(1)
    let tookA!: () => void
    const aTook = new Promise<void>((r) => (tookA = r))
    let aRuns = 0
    // Worker A loses its command connection for good in the middle of every batch.
    const servedA = await serveQueue({
      link: a!,
      queue,
      runner: { name: 't', execute: async () => (aRuns++, a!.client().disconnect(), tookA(), { by: 'a', big }) },
    })
    const pool = new RemotePool({ link: api!, queue, runner: 't', timeoutMs: 20_000 })
    await pool.start()
    const answer = pool.run('run', {})
    await aTook
    const servedB = await serveQueue({
      link: b!,
      queue,
      runner: { name: 't', execute: async () => ({ by: 'b', big }) },
    })
    const out = (await answer) as { by: string; big: Float32Array }
    assert.equal(out.by, 'b', 'the other worker ran it')
    assert.equal(out.big.length, 40_000)
    assert.equal(aRuns, 1, 'the worker that lost Redis took nothing more')
    await pool.stop()
    await Promise.all([servedA.close(), servedB.close()])
    await Promise.all([api, a, b].map((l) => l!.close()))
  })

  it('a batch that keeps failing for a transport reason ends as a retryable 503 E_REMOTE_UNAVAILABLE, not a 500', {
    timeout: 60_000,
  }, async () => {
    const [api, a] = [0, 1].map(() => new RedisLink(redis.url, 'mbtest'))
    const queue = `tf${process.pid}.run`
    const big = new Float32Array(40_000).fill(1)
    let runs = 0
    // The only worker drops its command connection mid-batch every time (it reconnects at once).
    const served = await serveQueue({
      link: a!,
      queue,
      runner: { name: 't', execute: async () => (runs++, a!.client().disconnect(true), big) },
    })
    const pool = new RemotePool({ link: api!, queue, runner: 't', timeoutMs: 20_000 })
    await pool.start()
    await assert.rejects(
      pool.run('run', {}),
      (err: any) => err.code === 'E_REMOTE_UNAVAILABLE' && err.status === 503 && /failed 3 times/.test(err.message),
    )
    assert.equal(runs, 3, 'tried three times')
    await pool.stop()
    await served.close()
    await Promise.all([api, a].map((l) => l!.close()))
  })

  it('Redis lost while a batch is being queued: the call fails with 503 E_REMOTE_UNAVAILABLE and nothing else (no ' +
    'unhandled rejection)', {
    timeout: 60_000,
  }, async () => {
    const [link, workerLink] = [0, 1].map(() => new RedisLink(redis.url, 'mbtest')) as [RedisLink, RedisLink]
    const queue = `tq${process.pid}.run`
    const served = await serveQueue({ link: workerLink, queue, runner: { name: 't', execute: async () => 'ran' } })
    const pool = new RemotePool({ link, queue, runner: 't', timeoutMs: 20_000 })
    await pool.start()
    const unhandled: unknown[] = []
    const seen = (e: unknown) => unhandled.push(e)
    process.on('unhandledRejection', seen)
    try {
      for (let i = 0; i < 5; i++) {
        // A payload large enough to be stored first; the connection drops while it is.
        const call = pool.run('run', { big: new Float32Array(40_000) })
        link.client().disconnect(true)
        await assert.rejects(call, (err: any) => err.code === 'E_REMOTE_UNAVAILABLE')
        await link.connected(10_000)
      }
      await new Promise((r) => setImmediate(r))
      assert.deepEqual(unhandled, [])
    } finally {
      process.off('unhandledRejection', seen)
      await pool.stop()
      await served.close()
      await Promise.all([link.close(), workerLink.close()])
    }
  })
})
