import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { customRunner } from '../../runners/index.js'

describe('customRunner', () => {
  it('runs TypeScript in a worker; batchable methods merge concurrent calls, others run as is', { timeout: 60_000 }, async () => {
    const r = customRunner({ module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' }, { name: 'echo', methods: { upper: { batchable: true, maxLatencyMs: 5000 } } })
    await r.start()
    try {
      assert.equal(r.ready(), true)
      assert.equal(await r.call('slow', 5), 5)
      const hold = r.call('slow', 200) // keeps the only worker busy so the next calls queue up
      const outs = await Promise.all(['a', 'b', 'c', 'd'].map((s) => r.batch<string, string>('upper', [s])))
      await hold
      const letters = outs.map((o) => o[0]!.split('/')[0])
      assert.deepEqual(letters, ['A', 'B', 'C', 'D'])
      assert.ok(outs.some((o) => Number(o[0]!.split('/')[1]) > 1), `some calls shared a batch: ${outs.flat()}`)
      assert.deepEqual(await r.batch('upper', ['x', 'y']), ['X/2', 'Y/2'])
      await assert.rejects(r.batch('slow', [1]), (e: { code?: string }) => e.code === 'E_SERVICE_DEFINITION')
    } finally {
      await r.stop()
    }
  })
})
