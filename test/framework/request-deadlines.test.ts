import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Deadlines } from '../../framework/server/deadlines.js'

// The API request timeout: one sweeping interval for all pending calls.
describe('Deadlines (API request timeouts)', () => {
  const never = () => new Promise<never>(() => {})

  it('settles as the work does, and holds nothing once it has', async () => {
    const d = new Deadlines(1_000)
    assert.equal(await d.within(Promise.resolve(7), 1_000, () => new Error('late')), 7)
    await assert.rejects(d.within(Promise.reject(new Error('boom')), 1_000, () => new Error('late')), /boom/)
    assert.equal(d.size, 0)
  })

  it('rejects with the timeout error once the time has passed; the work settling later changes nothing', async () => {
    const d = new Deadlines(20)
    let finish!: (v: string) => void
    const work = new Promise<string>((r) => (finish = r))
    const other = d.within(never(), 2_000, () => new Error('the other one'))
    await assert.rejects(d.within(work, 10, () => new Error('timed out')), /timed out/)
    finish('too late')
    await new Promise((r) => setImmediate(r))
    // Only the call still within its time is left.
    assert.equal(d.size, 1)
    await assert.rejects(other, /the other one/)
    assert.equal(d.size, 0)
  })

  it('takes calls out of the middle, the ends and the only slot of its list', async () => {
    const d = new Deadlines(1_000)
    const resolvers: ((v: number) => void)[] = []
    const calls = [0, 1, 2, 3].map((i) => d.within(new Promise<number>((r) => (resolvers[i] = r)), 60_000, () => new Error('late')))
    assert.equal(d.size, 4)
    for (const i of [2, 0, 3, 1]) resolvers[i]!(i)
    assert.deepEqual(await Promise.all(calls), [0, 1, 2, 3])
    assert.equal(d.size, 0)
    // The sweeping interval stops once nothing is pending: this test ending proves it (node:test would hang otherwise).
  })
})
