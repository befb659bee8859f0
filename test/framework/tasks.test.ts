// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundle, BIN } from '../utils/cli.js'
import { freePort, privateRedis, until, usePrivateRedis, type PrivateRedis, type Proc } from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

// Durable async tasks on a real redis-server of the test's own and real server processes:
// submit on one replica, read on another, kill the server mid-task and start it again.

const SERVICE = fileURLToPath(new URL('../fixtures/task-service.ts', import.meta.url))

/** A server with tasks on `redis`; resolves once ready, or with `listening`, once it answers at all. */
async function server(
  redis: string,
  env: Record<string, string> = {},
  wait: 'ready' | 'listening' = 'ready',
): Promise<Proc & { url: string }> {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, 'serve', SERVICE, '--port', String(port), '--redis', redis], {
    env: { ...process.env, BUNDLE_ACCESS_LOG: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += c))
  child.stderr!.on('data', (c) => (out += c))
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  const url = `http://127.0.0.1:${port}`
  const path = wait === 'ready' ? 'readyz' : 'livez'
  await until(
    `server ${wait}: ${out}`,
    async () => (await fetch(`${url}/${path}`).catch(() => undefined))?.status === 200,
    60_000,
  )
  return {
    child,
    url,
    output: () => out,
    stop: async (s: NodeJS.Signals = 'SIGTERM') => void (child.exitCode === null && child.kill(s), await exited),
  }
}

const post = async (url: string, body?: unknown) => {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: r.status, json: (await r.json()) as any }
}
const get = async (url: string) => {
  const r = await fetch(url)
  return { status: r.status, json: (await r.json()) as any }
}

describe('durable async tasks (@task) in Redis', () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))
  const failFile = join(tempDir(), 'fail')

  it('submit answers at once; any replica tells the status and gives the result', { timeout: 120_000 }, async () => {
    const a = await server(redis.url, { TASK_FAIL_FILE: failFile })
    const b = await server(redis.url, { TASK_FAIL_FILE: failFile })
    track(a)
    track(b)
    const t0 = Date.now()
    const sub = await post(`${a.url}/render/submit`, { ms: 1500, tag: 'first' })
    assert.equal(sub.status, 202)
    assert.ok(Date.now() - t0 < 1_000, 'submit does not wait for the task')
    const id = sub.json.taskId as string
    assert.match(id, /^[0-9a-f-]{36}$/)
    assert.ok(['pending', 'running'].includes((await get(`${b.url}/render/status?taskId=${id}`)).json.status))
    const early = await fetch(`${b.url}/render/result?taskId=${id}`)
    assert.equal(early.status, 409)
    assert.equal(((await early.json()) as any).error.code, 'E_TASK_NOT_FINISHED')
    await until(
      'success',
      async () => (await get(`${b.url}/render/status?taskId=${id}`)).json.status === 'success',
      30_000,
    )
    const status = (await get(`${a.url}/render/status?taskId=${id}`)).json
    assert.ok(status.createdAt && status.startedAt && status.finishedAt)
    const result = await get(`${b.url}/render/result?taskId=${id}`)
    assert.equal(result.status, 200)
    assert.equal(result.json.tag, 'first')
    // Both replicas run tasks.
    const many = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post(`${a.url}/render/submit`, { ms: 300, tag: `t${i}` })),
    )
    await until(
      'all done',
      async () =>
        (await Promise.all(many.map((m) => get(`${b.url}/render/status?taskId=${m.json.taskId}`)))).every(
          (s) => s.json.status === 'success',
        ),
      30_000,
    )
    const pids = new Set(
      (await Promise.all(many.map((m) => get(`${a.url}/render/result?taskId=${m.json.taskId}`)))).map(
        (r) => r.json.pid,
      ),
    )
    assert.equal(pids.size, 2, 'tasks ran on both replicas')
    // Clear errors.
    assert.equal(
      (await get(`${a.url}/render/status?taskId=00000000-0000-0000-0000-000000000000`)).json.error.code,
      'E_TASK_NOT_FOUND',
    )
    assert.equal((await get(`${a.url}/render/status`)).status, 400)
    assert.equal((await post(`${a.url}/render/submit`, { ms: -1, tag: 'x' })).status, 400)
    assert.equal((await post(`${a.url}/render/cancel?taskId=${id}`)).json.error.code, 'E_TASK_CONFLICT')
    await Promise.all([a.stop(), b.stop()])
  })

  it('a task survives its server being killed mid-run: it runs again once the server is back', {
    timeout: 120_000,
  }, async () => {
    const a = await server(redis.url)
    track(a)
    const id = (await post(`${a.url}/render/submit`, { ms: 3000, tag: 'survivor' })).json.taskId as string
    await until('running', async () => (await get(`${a.url}/render/status?taskId=${id}`)).json.status === 'running')
    await a.stop('SIGKILL')
    const again = await server(redis.url)
    track(again)
    assert.ok(['running', 'pending'].includes((await get(`${again.url}/render/status?taskId=${id}`)).json.status))
    // Its lock lapses (10 s), the stalled check puts it back, the new server runs it.
    await until(
      'success after restart',
      async () => (await get(`${again.url}/render/status?taskId=${id}`)).json.status === 'success',
      60_000,
    )
    const r = await get(`${again.url}/render/result?taskId=${id}`)
    assert.equal(r.json.tag, 'survivor')
    assert.equal(r.json.pid, again.child.pid, 'the new server ran it')
    await again.stop()
  })

  it('cancel stops a running task; a failed task keeps its error and runs again on retry', {
    timeout: 120_000,
  }, async () => {
    const a = await server(redis.url, { TASK_FAIL_FILE: failFile })
    track(a)
    const long = (await post(`${a.url}/render/submit`, { ms: 30_000, tag: 'long' })).json.taskId as string
    await until('running', async () => (await get(`${a.url}/render/status?taskId=${long}`)).json.status === 'running')
    const c = await post(`${a.url}/render/cancel?taskId=${long}`)
    assert.equal(c.status, 200)
    assert.equal((await get(`${a.url}/render/status?taskId=${long}`)).json.status, 'cancelled')
    const r = await get(`${a.url}/render/result?taskId=${long}`)
    assert.equal(r.status, 409)
    assert.equal(r.json.error.code, 'E_TASK_CANCELLED')
    writeFileSync(failFile, '')
    const bad = (await post(`${a.url}/render/submit`, { ms: 10, tag: 'flaky' })).json.taskId as string
    await until('failure', async () => (await get(`${a.url}/render/status?taskId=${bad}`)).json.status === 'failure')
    const st = (await get(`${a.url}/render/status?taskId=${bad}`)).json
    assert.equal(st.error, 'E_INPUT_INVALID: asked to fail (flaky)')
    assert.equal((await get(`${a.url}/render/result?taskId=${bad}`)).json.error.code, 'E_TASK_FAILED')
    rmSync(failFile)
    const retry = await post(`${a.url}/render/retry?taskId=${bad}`)
    assert.equal(retry.status, 200, JSON.stringify(retry.json))
    await until(
      'success on retry',
      async () => (await get(`${a.url}/render/status?taskId=${bad}`)).json.status === 'success',
    )
    assert.equal((await get(`${a.url}/render/result?taskId=${bad}`)).json.tag, 'flaky')
    assert.equal((await post(`${a.url}/render/retry?taskId=${bad}`)).json.error.code, 'E_TASK_CONFLICT')
    // Not an API route: the task's own routes are.
    assert.equal((await post(`${a.url}/render`, { ms: 1, tag: 'x' })).status, 404)
    const doc = (await get(`${a.url}/openapi.json`)).json
    assert.ok(doc.paths['/render/submit'].post && doc.paths['/render/status'].get && doc.paths['/render/result'].get)
    await a.stop()
  })

  it('a service with tasks will not serve without Redis, and says which flag', { timeout: 60_000 }, async () => {
    const r = await bundle(['serve', SERVICE, '--port', '0'], { BUNDLE_REDIS_URL: '' })
    assert.equal(r.code, 2)
    assert.match(r.stderr, /error E_SERVE_CONFIG_INVALID: \/render is a task, which live in Redis: serve with --redis/)
  })

  it("/readyz reflects the tasks' Redis: 503 naming tasks and Redis while it is unreachable, ready again when it " +
    'is back', {
    timeout: 120_000,
  }, async () => {
    // A Redis of this test's own: stopping it loses what it held.
    const own = await privateRedis()
    try {
      const a = await server(own.url)
      track(a)
      await own.stop()
      let state = { status: 0, reason: '' }
      const readyz = async () => {
        const r = await fetch(`${a.url}/readyz`)
        return (state = { status: r.status, reason: ((await r.json()) as any).reason ?? '' })
      }
      await until('not ready', async () => (await readyz()).status === 503, 10_000)
      assert.match(
        state.reason,
        /^tasks are not ready \(Redis at redis:\/\/127\.0\.0\.1:\d+ (is unreachable|closed the connection)/,
      )
      assert.equal(
        (await post(`${a.url}/render/submit`, { ms: 10, tag: 'down' })).json.error.code,
        'E_REMOTE_UNAVAILABLE',
      )
      await own.start()
      await until('ready again', async () => (await readyz()).status === 200, 30_000)
      const id = (await post(`${a.url}/render/submit`, { ms: 10, tag: 'back' })).json.taskId as string
      // Soon after Redis is back (BullMQ alone waits 15 s after a failed fetch; we retry after 1 s).
      await until(
        'success',
        async () => (await get(`${a.url}/render/status?taskId=${id}`)).json.status === 'success',
        20_000,
      )
      await a.stop()
    } finally {
      await own.stop()
    }
    // Started with its Redis unreachable: it runs, but is never ready, and says why.
    const b = await server('redis://127.0.0.1:1', {}, 'listening')
    track(b)
    let reason = ''
    await until('the reason', async () => {
      const r = await fetch(`${b.url}/readyz`)
      assert.equal(r.status, 503)
      reason = ((await r.json()) as any).reason
      return reason !== 'starting up'
    })
    assert.match(reason, /^tasks are not ready \(Redis at redis:\/\/127\.0\.0\.1:1 is unreachable/)
    await b.stop()
  })
})
