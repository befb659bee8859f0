import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Workers } from '../../runners/batching/workers.js'

describe('Workers: when a busy worker is expected to be free', () => {
  it('is corrected as batches come back, so estimates above the real times do not pile up', () => {
    // One worker holding two batches at a time, each estimated 5 ms typical and 15 ms slow, each
    // really taking 5 ms: after a thousand of them the expected end is what the worker holds, not
    // a thousand slow estimates ahead.
    const w = new Workers(1, 2)
    let now = 0
    const held = [w.took(now, 5, 15), w.took(now, 5, 15)]
    for (let i = 0; i < 1_000; i++) {
      now += 5
      w.returned(held.shift()!, now)
      held.push(w.took(now, 5, 15))
    }
    assert.equal(w.busy, 2)
    assert.ok(w.soonestFree(now, true) - now <= 30, `slow end ${w.soonestFree(now, true) - now} ms ahead`)
    assert.ok(w.soonestFree(now) - now <= 10, `typical end ${w.soonestFree(now) - now} ms ahead`)
  })

  it('counts a worker holding nothing as free now, and hands the next batch to the one free soonest', () => {
    const w = new Workers(2, 2)
    assert.equal(w.took(0, 10, 20), 0)
    assert.equal(w.soonestFree(0), 0, 'one worker still holds nothing')
    assert.equal(w.took(0, 4, 8), 1)
    assert.equal(w.soonestFree(0), 4)
    assert.equal(w.soonestFree(0, true), 8)
    assert.equal(w.took(0, 4, 8), 1, 'the worker free soonest takes the next')
    assert.equal(w.soonestFree(0), 8)
    w.returned(0, 3) // the first worker finished early
    assert.equal(w.soonestFree(3), 3, 'a worker holding nothing is free now')
  })
})
