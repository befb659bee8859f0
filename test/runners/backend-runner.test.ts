import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
// The public API only: a runner kind is added from outside runners/.
import { backendRunner, type BackendRunnerOptions } from '../../framework/index.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

const POLY = new URL('../fixtures/backends/polynomial-backend.ts', import.meta.url)
const SERVICE = fileURLToPath(new URL('../fixtures/backends/polynomial-service.ts', import.meta.url))

const polynomial = (
  name: string,
  o: Partial<BackendRunnerOptions> = {},
  options: unknown = { coefficients: [2, 0, 1] },
) =>
  backendRunner(
    { kind: 'polynomial', module: POLY, options },
    { name, workers: 2, methods: { evaluate: { batchable: true, maxDelayMs: 20 } }, ...o },
  )

const f32 = (n: number) => Float32Array.from({ length: n }, (_, i) => (i % 1000) / 100)

describe('a runner kind from a backend module (test/fixtures/backends)', () => {
  it('loads in worker processes with its options; methods batch or run as is; tensors travel both ways', {
    timeout: 60_000,
  }, async () => {
    const r = polynomial('poly-process')
    await r.start()
    try {
      assert.equal(r.kind, 'polynomial')
      assert.equal(r.ready(), true)
      const config = r.effectiveConfig()
      assert.equal(config.kind, 'polynomial')
      assert.equal(config.module, fileURLToPath(POLY))
      assert.equal(config.workers, 2)
      const who = await r.call<{ runner: string; index: number; pid: number }>('whoami')
      assert.equal(who.runner, 'poly-process')
      assert.ok(who.index === 0 || who.index === 1, `worker index ${who.index}`)
      assert.notEqual(who.pid, process.pid, 'the backend runs in a process of its own')
      const xs = [0, 1, 2, 3, -1.5, 10]
      const ys = await Promise.all(xs.map((x) => r.batch<number, number>('evaluate', [x])))
      assert.deepEqual(
        ys.flat(),
        xs.map((x) => 2 * x * x + 1),
      )
      // 400 KB: through the worker's shared-memory file, not the IPC socket.
      const x = f32(100_000)
      const out = await r.call<{ y: { dtype: string; shape: number[]; data: Uint8Array } }>('tensor', {
        x: { dtype: 'float32', shape: [100, 1000], data: new Uint8Array(x.buffer) },
      })
      assert.equal(out.y.dtype, 'float32')
      assert.deepEqual(out.y.shape, [100, 1000])
      const y = new Float32Array(out.y.data.slice().buffer)
      assert.deepEqual(
        y,
        x.map((v) => 2 * v * v + 1),
      )
    } finally {
      await r.stop()
    }
  })

  it('runs as threads of this process too (isolation: thread), results moved back', { timeout: 60_000 }, async () => {
    const r = polynomial('poly-thread', { isolation: 'thread', workers: 1 })
    await r.start()
    try {
      assert.equal((await r.call<{ pid: number }>('whoami')).pid, process.pid)
      const x = f32(50_000)
      const out = await r.call<{ y: { data: Uint8Array } }>('tensor', {
        x: { dtype: 'float32', shape: [50_000], data: new Uint8Array(x.buffer.slice(0)) },
      })
      assert.deepEqual(
        new Float32Array(out.y.data.slice().buffer),
        x.map((v) => 2 * v * v + 1),
      )
    } finally {
      await r.stop()
    }
  })

  it('a module that is not a backend, or whose load fails, fails start with what is wrong', {
    timeout: 60_000,
  }, async () => {
    const dir = tempDir()
    const notBackend = join(dir, 'not-a-backend.mjs')
    writeFileSync(notBackend, 'export const answer = 42\n')
    const cases: [string, ReturnType<typeof backendRunner>, RegExp][] = [
      [
        'no load export',
        backendRunner({ kind: 'x', module: notBackend }, { name: 'not-backend', workers: 1 }),
        /not-a-backend\.mjs is not a runner backend: it has no exported load\(options, context\) function/,
      ],
      [
        'load throws',
        polynomial('poly-bad-options', { workers: 1 }, { coefficients: [] }),
        /needs options\.coefficients/,
      ],
      [
        'no such file',
        backendRunner({ kind: 'x', module: join(dir, 'missing.mjs') }, { name: 'missing', workers: 1 }),
        /missing\.mjs/,
      ],
    ]
    for (const [what, r, message] of cases) {
      await assert.rejects(r.start(), (e: { code?: string; message: string }) => {
        assert.equal(e.code, 'E_RUNNER_CRASHED', what)
        assert.match(e.message, /could not start/, what)
        assert.match(e.message, message, what)
        return true
      })
      await r.stop()
    }
  })

  it('is served by `bundle serve` from a service of the user’s own; GET /runners names its kind', {
    timeout: 120_000,
  }, async () => {
    const s = await serveReady(SERVICE)
    try {
      const answers = await Promise.all(
        [0, 1, 2, 3, 4, 5, 6, 7].map(async (x) => {
          const r = await fetch(`${s.url}/evaluate`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ x }),
          })
          assert.equal(r.status, 200)
          return (await r.json()) as { y: number; worker: number }
        }),
      )
      assert.deepEqual(
        answers.map((a) => a.y),
        [0, 1, 2, 3, 4, 5, 6, 7].map((x) => 2 * x * x + 1),
      )
      assert.ok(
        answers.every((a) => a.worker !== s.pid),
        'answered by worker processes, not the server',
      )
      const runners = (await (await fetch(`${s.url}/runners`)).json()) as { kind: string; name: string }[]
      const poly = JSON.stringify(runners)
      assert.match(poly, /"kind":"polynomial"/)
      assert.match(poly, /"name":"poly"/)
    } finally {
      await s.stop('SIGTERM')
    }
  })
})
