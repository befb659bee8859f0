import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Deadlines } from '../../framework/server/deadlines.js'

// The API request timeout: one sweeping interval for all pending calls, no promise per call.
describe('Deadlines (API request timeouts)', () => {
  it('fires once the time has passed, and only for calls still pending', async () => {
    const d = new Deadlines(20)
    const fired: string[] = []
    const late = new Promise<void>((resolve) => d.add(10, () => (fired.push('late'), resolve())))
    const done = d.add(10, () => fired.push('done in time'))
    d.remove(done)
    const other = new Promise<void>((resolve) => d.add(2_000, () => (fired.push('other'), resolve())))
    await late
    assert.deepEqual(fired, ['late'])
    // Only the call still within its time is left.
    assert.equal(d.size, 1)
    await other
    assert.deepEqual(fired, ['late', 'other'])
    assert.equal(d.size, 0)
  })

  it('takes calls out of the middle, the ends and the only slot of its list; removing twice is harmless', () => {
    const d = new Deadlines(1_000)
    const calls = [0, 1, 2, 3].map(() => d.add(60_000, () => assert.fail('no call here times out')))
    assert.equal(d.size, 4)
    for (const i of [2, 0, 3, 1]) d.remove(calls[i]!)
    assert.equal(d.size, 0)
    d.remove(calls[1]!)
    assert.equal(d.size, 0)
    const again = d.add(60_000, () => assert.fail('removed'))
    assert.equal(d.size, 1)
    d.remove(again)
    // The sweeping interval stops once nothing is pending: this file ending proves it (node:test would wait otherwise).
  })
})
