import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { WorkerPool } from '../../runners/pool/worker-pool.js'

const ECHO = fileURLToPath(new URL('../fixtures/echo-runner.ts', import.meta.url))
const pool = (extra: Partial<ConstructorParameters<typeof WorkerPool>[0]> = {}) =>
  new WorkerPool({ runner: 'echo', workers: 2, backend: { kind: 'custom', module: ECHO, exportName: 'EchoRunner' }, backoffMs: { min: 50, max: 400 }, ...extra })

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('WorkerPool (real child processes)', () => {
  it('runs calls in named worker processes; typed arrays cross as bytes', { timeout: 60_000 }, async () => {
    const p = pool()
    await p.start()
    try {
      assert.equal(p.ready(), true)
      const out = (await p.run('double', { data: new Float32Array([1, 2, 3]) })) as { data: Float32Array }
      assert.ok(out.data instanceof Float32Array)
      assert.deepEqual([...out.data], [2, 4, 6])
      for (const [i, pid] of p.pids().entries()) {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
        assert.match(cmdline, new RegExp(`bundle-runner-worker echo#${i}`))
      }
      await assert.rejects(p.run('fail', null), /the model said no/)
    } finally {
      await p.stop()
    }
  })

  it('a worker that dies fails its call at once with E_RUNNER_CRASHED, others go on, and it is restarted', { timeout: 60_000 }, async () => {
    const events: string[] = []
    const p = pool({ onEvent: (e) => events.push(e.type) })
    await p.start()
    try {
      const other = p.run('slow', 300)
      const t = Date.now()
      await assert.rejects(p.run('crash', null), (e: BundleError) => e.code === 'E_RUNNER_CRASHED' && /exited with code 3/.test(e.message))
      assert.ok(Date.now() - t < 2000, 'failed at once, did not hang')
      assert.equal(await other, 300)
      for (let i = 0; i < 100 && !p.ready(); i++) await new Promise((r) => setTimeout(r, 50))
      assert.equal(p.ready(), true, 'back within 5 s')
      assert.equal(p.restarts, 1)
      assert.deepEqual(events, ['crash', 'restart'])
      assert.deepEqual([...((await p.run('double', { data: new Float32Array([5]) })) as { data: Float32Array }).data], [10])
    } finally {
      await p.stop()
    }
  })

  it('a call past the timeout fails with E_RUNNER_TIMEOUT and its worker is replaced', { timeout: 60_000 }, async () => {
    const p = pool({ workers: 1, timeoutMs: 300 })
    await p.start()
    try {
      const before = p.pids()[0]!
      const t = Date.now()
      await assert.rejects(p.run('slow', 5000), (e: BundleError) => e.code === 'E_RUNNER_TIMEOUT' && e.status === 504)
      assert.ok(Date.now() - t < 2000)
      for (let i = 0; i < 100 && !p.ready(); i++) await new Promise((r) => setTimeout(r, 50))
      assert.notEqual(p.pids()[0], before)
      assert.equal(await p.run('slow', 10), 10)
    } finally {
      await p.stop()
    }
  })

  it('stop() leaves no worker process behind; a backend that cannot load fails start()', { timeout: 60_000 }, async () => {
    const p = pool()
    await p.start()
    const pids = p.pids()
    await p.stop()
    await new Promise((r) => setTimeout(r, 100))
    for (const pid of pids) assert.equal(alive(pid), false, `worker ${pid} still running`)
    await assert.rejects(p.run('title', null), (e: BundleError) => e.code === 'E_RUNNER_STOPPED')

    const bad = new WorkerPool({ runner: 'bad', workers: 1, backend: { kind: 'custom', module: ECHO, exportName: 'Nope' } })
    await assert.rejects(bad.start(), (e: BundleError) => e.code === 'E_RUNNER_CRASHED' && /no export named Nope/.test(e.message))
    await bad.stop()
  })
})
