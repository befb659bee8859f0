import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { autoscale, ScalePolicy, type ScalablePool } from '../../runners/autoscaler.js'
import type { DispatcherStats } from '../../runners/batching/dispatcher.js'
import { FakeClock } from '../utils/fake-clock.js'

// The autoscaler's decisions on fake time, beside the real-process test (autoscale.test.ts).

/** Ten samples: one interval. */
const interval = (p: ScalePolicy, inFlight: number, queuedRows: number, workers: number) => {
  const out: ('grow' | 'shrink' | undefined)[] = []
  for (let i = 0; i < 10; i++) out.push(p.sample({ inFlight, queuedRows }, workers))
  return out.filter((x) => x !== undefined)
}

describe('ScalePolicy', () => {
  it('adds a worker after a busy interval with rows waiting, never beyond max', () => {
    const p = new ScalePolicy({ min: 1, max: 2 })
    assert.deepEqual(interval(p, 1, 4, 1), ['grow'])
    assert.deepEqual(interval(p, 2, 4, 2), [], 'at max')
    // Busy but nothing waiting: the workers keep up.
    assert.deepEqual(interval(new ScalePolicy({ min: 1, max: 4 }), 1, 0, 1), [])
  })

  it('removes one only after two quiet intervals in a row, never below min', () => {
    const p = new ScalePolicy({ min: 1, max: 4 })
    assert.deepEqual(interval(p, 0, 0, 3), [])
    assert.deepEqual(interval(p, 0, 0, 3), ['shrink'])
    // A middle interval in between starts the count again.
    assert.deepEqual(interval(p, 0, 0, 2), [])
    assert.deepEqual(interval(p, 1, 0, 2), [])
    assert.deepEqual(interval(p, 0, 0, 2), [])
    assert.deepEqual(interval(p, 0, 0, 2), ['shrink'])
    assert.deepEqual(interval(p, 0, 0, 1), [])
    assert.deepEqual(interval(p, 0, 0, 1), [], 'at min')
  })
})

describe('autoscale (fake time)', () => {
  function fixture(grow: () => Promise<void>) {
    const clock = new FakeClock()
    const stats: DispatcherStats = {
      queuedRows: 8,
      queuedRequests: 8,
      inFlight: 1,
      targetBatchSize: 1,
      observations: 10,
      overheadMs: 0,
    }
    const slots: number[] = []
    const pool: ScalablePool & { size: number; grows: number } = {
      size: 1,
      grows: 0,
      async grow() {
        this.grows++
        await grow()
        this.size++
      },
      async shrink() {
        this.size--
      },
    }
    const stop = autoscale(
      { dispatcher: () => ({ stats: () => stats, setSlots: (n) => slots.push(n) }), pool: () => pool },
      { min: 1, max: 3, intervalMs: 1_000 },
      clock,
    )
    return { clock, stats, pool, slots, stop }
  }

  it(
    'grows once per busy interval, takes no samples while ' + 'a worker starts, and gives the batcher the new slots',
    async () => {
      let started!: () => void
      const f = fixture(() => new Promise<void>((r) => (started = r)))
      await f.clock.advance(1_000)
      assert.equal(f.pool.grows, 1)
      // The worker takes 5 s to start: no sampling meanwhile, so no second grow.
      await f.clock.advance(5_000)
      assert.equal(f.pool.grows, 1)
      started()
      await f.clock.settle()
      assert.deepEqual(f.slots, [2])
      // Two workers, each with a batch, rows still waiting: one more.
      f.stats.inFlight = 2
      await f.clock.advance(1_000)
      assert.equal(f.pool.grows, 2)
      f.stop()
    },
  )

  it('a worker that cannot start is tried again after the next busy interval; quiet shrinks back', async () => {
    let fail = true
    const f = fixture(() => (fail ? Promise.reject(new Error('spawn failed')) : Promise.resolve()))
    await f.clock.advance(1_000)
    assert.equal(f.pool.grows, 1)
    assert.equal(f.pool.size, 1)
    fail = false
    await f.clock.advance(1_000)
    assert.equal(f.pool.grows, 2)
    assert.equal(f.pool.size, 2)
    f.stats.inFlight = 0
    f.stats.queuedRows = 0
    await f.clock.advance(2_000)
    assert.equal(f.pool.size, 1)
    assert.deepEqual(f.slots, [2, 1])
    f.stop()
    f.stats.inFlight = 1
    f.stats.queuedRows = 8
    await f.clock.advance(5_000)
    assert.equal(f.pool.size, 1, 'stopped: no more decisions')
  })
})
