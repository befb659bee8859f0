import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IdleTimer } from '../../runners/idle-timer.js'
import { FakeClock } from '../utils/fake-clock.js'

describe('IdleTimer (fake time)', () => {
  it('fires once afterMs pass without a touch, not before; a touch moves the moment', async () => {
    const clock = new FakeClock()
    const fired: number[] = []
    const t = new IdleTimer(1_000, () => (fired.push(clock.now()), false), clock)
    t.start()
    await clock.advance(600)
    t.touch()
    await clock.advance(900) // 1500: 900 since the touch
    assert.deepEqual(fired, [])
    await clock.advance(100)
    assert.deepEqual(fired, [1_600])
    await clock.advance(10_000)
    assert.deepEqual(fired, [1_600], 'onIdle answered false: the watch is over')
  })

  it('keeps watching when onIdle declines, and start() begins a new watch', async () => {
    const clock = new FakeClock()
    const fired: number[] = []
    let keep = true
    const t = new IdleTimer(500, () => (fired.push(clock.now()), keep), clock)
    t.start()
    await clock.advance(1_200)
    assert.deepEqual(fired, [500, 1_000])
    keep = false
    await clock.advance(500)
    assert.deepEqual(fired, [500, 1_000, 1_500])
    t.start()
    await clock.advance(499)
    assert.equal(fired.length, 3)
    await clock.advance(1)
    assert.deepEqual(fired, [500, 1_000, 1_500, 2_200])
  })

  it('stop() ends the watch; touches cost no timers', async () => {
    const clock = new FakeClock()
    let fired = 0
    const t = new IdleTimer(100, () => (fired++, true), clock)
    t.start()
    for (let i = 0; i < 1_000; i++) t.touch()
    assert.equal(clock.pending(), 1, 'one timer however many touches')
    t.stop()
    await clock.advance(1_000)
    assert.equal(fired, 0)
  })
})
