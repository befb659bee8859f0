import assert from 'node:assert/strict'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { ShmChannel } from '../../runners/pool/shm.js'
import { WorkerPool } from '../../runners/pool/worker-pool.js'
import { customBackend } from '../../runners/custom/protocol.js'
import { until } from '../utils/until.js'

const ECHO = fileURLToPath(new URL('../fixtures/echo-runner.ts', import.meta.url))
const pool = (extra: Partial<ConstructorParameters<typeof WorkerPool>[0]> = {}) =>
  new WorkerPool({
    runner: 'echo',
    workers: 2,
    backend: customBackend({ module: ECHO, exportName: 'EchoRunner' }),
    backoffMs: { min: 50, max: 400 },
    ...extra,
  })

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

  it('a worker that dies fails its call at once with E_RUNNER_CRASHED, others go on, and it is restarted', {
    timeout: 60_000,
  }, async () => {
    const events: string[] = []
    const p = pool({ onEvent: (e) => events.push(e.type) })
    await p.start()
    try {
      const other = p.run('slow', 300)
      const t = Date.now()
      await assert.rejects(
        p.run('crash', null),
        (e: BundleError) => e.code === 'E_RUNNER_CRASHED' && /exited with code 3/.test(e.message),
      )
      assert.ok(Date.now() - t < 2000, 'failed at once, did not hang')
      assert.equal(await other, 300)
      await until('the crashed worker to be back', () => p.ready())
      assert.equal(p.restarts, 1)
      assert.deepEqual(events, ['crash', 'restart'])
      assert.deepEqual(
        [...((await p.run('double', { data: new Float32Array([5]) })) as { data: Float32Array }).data],
        [10],
      )
    } finally {
      await p.stop()
    }
  })

  it('a call past the timeout fails with E_RUNNER_TIMEOUT and its worker is replaced', {
    timeout: 60_000,
  }, async () => {
    const p = pool({ workers: 1, timeoutMs: 300 })
    await p.start()
    try {
      const before = p.pids()[0]!
      const t = Date.now()
      await assert.rejects(p.run('slow', 5000), (e: BundleError) => e.code === 'E_RUNNER_TIMEOUT' && e.status === 504)
      assert.ok(Date.now() - t < 2000)
      await until('a new worker to replace the timed-out one', () => p.ready())
      assert.notEqual(p.pids()[0], before)
      assert.equal(await p.run('slow', 10), 10)
    } finally {
      await p.stop()
    }
  })

  it('stop() leaves no worker process behind; a backend that cannot load fails start()', {
    timeout: 60_000,
  }, async () => {
    const p = pool()
    await p.start()
    const pids = p.pids()
    // stop() resolves once its workers have exited: checked at once, not after a pause.
    await p.stop()
    for (const pid of pids) assert.equal(alive(pid), false, `worker ${pid} still running`)
    await assert.rejects(p.run('title', null), (e: BundleError) => e.code === 'E_RUNNER_STOPPED')

    const bad = new WorkerPool({
      runner: 'bad',
      workers: 1,
      backend: customBackend({ module: ECHO, exportName: 'Nope' }),
    })
    await assert.rejects(
      bad.start(),
      (e: BundleError) => e.code === 'E_RUNNER_CRASHED' && /no export named Nope/.test(e.message),
    )
    await bad.stop()
  })

  it('big tensors travel through a shared-memory file that leaves no name behind; without /dev/shm they go inline', {
    timeout: 60_000,
  }, async () => {
    const tensor = (bytes: number, seed: number) => ({
      dtype: 'uint8',
      shape: [bytes],
      data: Uint8Array.from({ length: bytes }, (_, i) => (i * 31 + seed) & 255),
    })
    const shmFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`modelbundle-${process.pid}-`))
    for (const inline of [false, true]) {
      const saved = process.env.BUNDLE_IPC_SHM
      if (inline) process.env.BUNDLE_IPC_SHM = '0'
      const p = pool({ workers: 1 })
      try {
        await p.start()
        // Two big tensors and a small one in one message, nested as runner inputs are.
        const args = { inputs: { a: tensor(1 << 20, 1), b: tensor(300_000, 2), small: tensor(16, 3) }, note: 'kept' }
        for (let i = 0; i < 3; i++) {
          const out = (await p.run('echo', args)) as typeof args
          assert.equal(out.note, 'kept')
          for (const k of ['a', 'b', 'small'] as const) {
            assert.deepEqual(out.inputs[k].shape, args.inputs[k].shape)
            assert.ok(
              Buffer.from(out.inputs[k].data).equals(Buffer.from(args.inputs[k].data)),
              `${k} came back byte for byte`,
            )
          }
        }
        const fds = readdirSync(`/proc/${p.pids()[0]}/fd`).map((fd) => {
          try {
            return readlinkSync(`/proc/${p.pids()[0]}/fd/${fd}`)
          } catch {
            return ''
          }
        })
        const mapped = fds.some((l) => /\/dev\/shm\/modelbundle-.*\(deleted\)/.test(l))
        assert.equal(
          mapped,
          !inline,
          inline
            ? 'BUNDLE_IPC_SHM=0: no shared-memory file'
            : 'the worker holds the (already unlinked) shared-memory file',
        )
        assert.deepEqual(shmFiles(), [], 'no name is left in /dev/shm')
      } finally {
        await p.stop()
        if (saved === undefined) delete process.env.BUNDLE_IPC_SHM
        else process.env.BUNDLE_IPC_SHM = saved
      }
    }
  })

  it('BUNDLE_IPC_SHM_MIN_BYTES sets the size from which tensors use the file; a bad value is refused', {
    timeout: 60_000,
  }, async () => {
    const small = { dtype: 'uint8', shape: [16], data: Uint8Array.from({ length: 16 }, (_, i) => i * 7) }
    const dflt = ShmChannel.create('/dev/shm', 'test')!
    const low = ShmChannel.create('/dev/shm', 'test', 8)!
    try {
      assert.equal(dflt.encode({ x: small }).slots.length, 0, '16 bytes stay in the message by default')
      assert.equal(low.encode({ x: small }).slots.length, 1, 'from 8 bytes on, they go through the file')
    } finally {
      for (const c of [dflt, low]) c.unlink(), c.close()
    }
    const saved = process.env.BUNDLE_IPC_SHM_MIN_BYTES
    try {
      // Both sides follow the API process's setting: the worker's outputs come back through the file too.
      process.env.BUNDLE_IPC_SHM_MIN_BYTES = '1'
      const p = pool({ workers: 1 })
      try {
        await p.start()
        const out = (await p.run('echo', { x: small })) as { x: typeof small }
        assert.ok(Buffer.from(out.x.data).equals(Buffer.from(small.data)), 'came back byte for byte')
      } finally {
        await p.stop()
      }
      for (const bad of ['0', '-5', '64k', '1.5']) {
        process.env.BUNDLE_IPC_SHM_MIN_BYTES = bad
        assert.throws(
          () => pool({ workers: 1 }),
          (e: BundleError) => e.code === 'E_SERVE_CONFIG_INVALID' && e.message.includes('BUNDLE_IPC_SHM_MIN_BYTES'),
        )
      }
    } finally {
      if (saved === undefined) delete process.env.BUNDLE_IPC_SHM_MIN_BYTES
      else process.env.BUNDLE_IPC_SHM_MIN_BYTES = saved
    }
  })
})
