import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { customRunner } from '../../runners/index.js'

describe('customRunner', () => {
  it('runs TypeScript in a worker; batchable methods merge concurrent calls, others run as is', {
    timeout: 60_000,
  }, async () => {
    const r = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      { name: 'echo', methods: { upper: { batchable: true, maxLatencyMs: 5000 } } },
    )
    await r.start()
    try {
      assert.equal(r.ready(), true)
      assert.equal(await r.call('slow', 5), 5)
      const hold = r.call('slow', 200) // keeps the only worker busy so the next calls queue up
      const outs = await Promise.all(['a', 'b', 'c', 'd'].map((s) => r.batch<string, string>('upper', [s])))
      await hold
      const letters = outs.map((o) => o[0]!.split('/')[0])
      assert.deepEqual(letters, ['A', 'B', 'C', 'D'])
      assert.ok(
        outs.some((o) => Number(o[0]!.split('/')[1]) > 1),
        `some calls shared a batch: ${outs.flat()}`,
      )
      assert.deepEqual(await r.batch('upper', ['x', 'y']), ['X/2', 'Y/2'])
      await assert.rejects(r.batch('slow', [1]), (e: { code?: string }) => e.code === 'E_SERVICE_DEFINITION')
    } finally {
      await r.stop()
    }
  })
})

describe('errors from a custom runner worker', () => {
  it('keep their catalog code and details across the process boundary; other codes do not pass as ours', {
    timeout: 60_000,
  }, async () => {
    const r = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      { name: 'echo-errors' },
    )
    await r.start()
    try {
      await assert.rejects(
        r.call('refuse', 'too long'),
        (e: { code?: string; status?: number; message?: string; details?: unknown }) => {
          assert.equal(e.code, 'E_INPUT_INVALID')
          assert.equal(e.status, 400)
          assert.equal(e.message, 'the runner refuses: too long')
          assert.deepEqual(e.details, [{ path: ['text'], message: 'too long' }])
          return true
        },
      )
      await assert.rejects(
        r.call('foreign'),
        (e: { code?: string; message?: string }) => e.code === undefined && e.message === 'no such file',
      )
    } finally {
      await r.stop()
    }
  })

  it('reach the HTTP client with their status and code, not as 500 E_INTERNAL', { timeout: 60_000 }, async () => {
    const { createServiceApp, defineApi, defineService, io } = await import('../../framework/index.js')
    const { default: pino } = await import('pino')
    const r = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      { name: 'echo-http' },
    )
    const def = defineService({
      name: 'coded-errors',
      runners: [r],
      apis: {
        check: defineApi({ input: io.text(), output: io.text(), handler: (t: string) => r.call<string>('refuse', t) }),
      },
    })
    const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
    await svc.start()
    try {
      const res = await svc.app.request('/check', {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'bad input',
      })
      assert.equal(res.status, 400)
      const body = (await res.json()) as { error: { code: string; message: string; details: unknown } }
      assert.equal(body.error.code, 'E_INPUT_INVALID')
      assert.equal(body.error.message, 'the runner refuses: bad input')
      assert.deepEqual(body.error.details, [{ path: ['text'], message: 'bad input' }])
    } finally {
      await svc.stop()
    }
  })

  it('bounds each batchable method’s queue: maxQueueSize in code, and an operator’s batching.maxQueueSize over it', {
    timeout: 60_000,
  }, async () => {
    const make = (name: string, maxQueueSize: number) =>
      customRunner(
        { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
        {
          name,
          workers: 1,
          batchesPerWorker: 1,
          methods: { sleepy: { batchable: true, maxBatchSize: 1, maxDelayMs: 0, maxQueueSize } },
        },
      )
    const inCode = make('bounded', 2)
    const overridden = make('overridden', 50)
    overridden.configure({ batching: { maxQueueSize: 1 } })
    assert.equal(
      (overridden.effectiveConfig().methods as Record<string, { maxQueueSize: number }>).sleepy?.maxQueueSize,
      1,
    )
    await Promise.all([inCode.start(), overridden.start()])
    try {
      for (const [r, room] of [
        [inCode, 2],
        [overridden, 1],
      ] as const) {
        const busy = r.batch('sleepy', [{ id: 'busy', ms: 300 }]) // on the only worker
        const queued = Array.from({ length: room }, (_, i) => r.batch('sleepy', [{ id: `q${i}`, ms: 1 }]))
        await assert.rejects(
          r.batch('sleepy', [{ id: 'over', ms: 1 }]),
          (e: { code?: string; message?: string }) =>
            e.code === 'E_RUNNER_OVERLOADED' && /queue is full/.test(e.message ?? ''),
        )
        assert.deepEqual(await Promise.all([busy, ...queued]), [
          ['busy'],
          ...Array.from({ length: room }, (_, i) => [`q${i}`]),
        ])
      }
    } finally {
      await Promise.all([inCode.stop(), overridden.stop()])
    }
  })
})
