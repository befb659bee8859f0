import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { LatencyModel } from '../../runners/batching/latency-model.js'

describe('LatencyModel', () => {
  it('estimates by interpolating measured sizes and picks the size with the best measured throughput', () => {
    const m = new LatencyModel({ reprobeEvery: 1_000_000 })
    assert.equal(m.bestBatchSize(32), 32, 'nothing measured: start big')
    for (let i = 0; i < 5; i++) {
      m.observe(1, 10)
      m.observe(8, 12)
      m.observe(16, 30)
    }
    assert.equal(m.estimate(8), 12)
    assert.equal(m.estimate(12), 21, 'between 8 and 16 rows: on the line between them')
    assert.equal(m.estimate(32), 66, 'past the largest: the last segment extended')
    // measured: 8 is best; its neighbours 4 (unknown) gets probed first
    assert.equal(m.bestBatchSize(32), 4)
    for (let i = 0; i < 5; i++) m.observe(4, 11)
    assert.equal(m.bestBatchSize(32), 8)
  })

  it("'slow' is the 90th percentile of a size's recent batches, 'best' the fastest, the default the median", () => {
    const m = new LatencyModel()
    for (const ms of [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 40]) m.observe(4, ms)
    assert.equal(m.estimate(4), 17)
    assert.equal(m.estimate(4, 'best'), 10)
    assert.equal(m.estimate(4, 'slow'), 23, 'nearest rank: 14th of 15 — one outlier does not set it')
  })

  it('a few outliers (cold first runs, a noisy neighbour) do not move the estimate; a lasting change does', () => {
    const m = new LatencyModel()
    for (let i = 0; i < 3; i++) m.observe(4, 60) // cold
    for (let i = 0; i < 10; i++) m.observe(4, 2)
    assert.equal(m.estimate(4), 2)
    m.observe(4, 80)
    assert.equal(m.estimate(4), 2)
    for (let i = 0; i < 15; i++) m.observe(4, 5) // the machine got slower for good
    assert.equal(m.estimate(4), 5)
  })

  it('with a clock, re-probes a neighbour of the best size once a second, however few batches ran', () => {
    let now = 0
    const m = new LatencyModel({ now: () => now })
    for (let i = 0; i < 5; i++)
      for (const [rows, ms] of [
        [2, 4],
        [4, 5],
        [8, 12],
      ] as const)
        m.observe(rows, ms)
    assert.equal(m.bestBatchSize(8), 4, 'measured: 4 rows is best, both neighbours known')
    now = 999
    assert.equal(m.bestBatchSize(8), 4, 'not yet due')
    now = 1000
    assert.equal(m.bestBatchSize(8), 8, 'due after a second: the bigger neighbour first')
    assert.equal(m.bestBatchSize(8), 8, 'and due until a batch of that size runs (the sizer may decline it)')
    m.observe(4, 5)
    assert.equal(m.bestBatchSize(8), 8, 'a batch of another size does not count as the probe')
    m.observe(8, 12)
    assert.equal(m.bestBatchSize(8), 4, 'probed: back to the best')
    now = 2000
    assert.equal(m.bestBatchSize(8), 2, 'the next probe goes the other way')
    m.observe(2, 4)
    // The probe measured the machine as it is now: a size that got faster takes over.
    now = 2500
    for (let i = 0; i < 15; i++) m.observe(8, 6)
    assert.equal(m.bestBatchSize(8), 8)
    // Only two batches in the next five seconds: still re-probed, where a batch count would wait.
    now = 8000
    assert.equal(m.bestBatchSize(8), 4, 'a trickle re-probes too')
  })

  it('with a clock, a size no batch refreshed for staleMs while others ran is set aside, then measured afresh', () => {
    let now = 0
    const m = new LatencyModel({ now: () => now, staleMs: 10_000, reprobeMs: Infinity })
    // A warm-up timed at a bad moment: 8 rows at 18 ms where they take 4.4.
    for (const [rows, ms] of [
      [1, 0.8],
      [2, 1.5],
      [4, 2.6],
      [8, 18],
    ] as const)
      m.observe(rows, ms)
    assert.equal(m.estimate(8), 18)
    // Ten seconds of batches of 2 and 4 (a tight deadline that could not afford 18 ms)...
    for (; now <= 10_000; now += 100) m.observe(now % 200 ? 2 : 4, now % 200 ? 1.5 : 2.6)
    assert.equal(m.estimate(8), 18, 'not yet stale: 10 s exactly')
    now += 1
    m.observe(4, 2.6)
    // ...and 8 rows is no longer known: its time is the line through what is (2.6 + 4 × 0.55 ms).
    assert.equal(m.estimate(8).toFixed(2), '4.80')
    assert.equal(m.estimate(1, 'best').toFixed(2), '0.95', 'one row, stale too: the line through 2 and 4 rows')
    assert.equal(m.bestBatchSize(8, false), 4, 'only what is fresh is measured')
    assert.equal(m.bestBatchSize(8), 8, 'and the size set aside is unmeasured, so it is tried')
    m.observe(8, 4.4)
    assert.equal(m.estimate(8, 'slow'), 4.4, 'measured afresh: the 18 ms batch is gone')
    assert.equal(m.bestBatchSize(8, false), 8, 'and it is the best size')
  })

  it('an idle runner forgets nothing: staleness counts from the newest batch, not the wall clock', () => {
    let now = 0
    const m = new LatencyModel({ now: () => now, staleMs: 10_000 })
    m.observe(1, 1)
    m.observe(8, 4)
    now = 3_600_000
    m.observe(1, 1)
    assert.equal(m.estimate(8), 4, 'the first batch an hour later')
    for (let i = 0; i < 63; i++) m.observe(1, 1)
    assert.equal(m.estimate(8), 4, 'and more, up to 64 batches of other sizes since the last of 8 rows')
    m.observe(1, 1)
    assert.equal(m.estimate(8), 8, 'past 64 batches of other sizes, 8 rows is stale: per-row from 1 row')
  })
})
