import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Dispatcher } from '../../runners/batching/dispatcher.js'
import { LatencyModel } from '../../runners/batching/latency-model.js'
import { LoopBusy, OfferedRate, sustainedRate } from '../../runners/batching/load.js'
import { FakeClock } from '../utils/fake-clock.js'
import { type Payload, sliceRunner as runner, trained } from '../utils/sim-runner.js'

// What bundle_desired_replicas is made of: rows offered per second over a sliding window, and
// rows per second the workers sustain within the deadline, from the latency model. Pure logic on a
// fake clock, then one dispatcher under a steady offered load.

describe('replica load: offered rows against sustained rows', () => {
  it('the offered rate counts rows over the last 10 s, the partial second pro rata', () => {
    const r = new OfferedRate(10_000)
    assert.equal(r.perSecond(0), 0)
    // 100 rows a second for 20 s: the window holds 10 s of them.
    for (let t = 0; t < 20_000; t += 10) r.add(t, 1)
    assert.ok(Math.abs(r.perSecond(19_999) - 100) < 1.5, String(r.perSecond(19_999)))
    // Silence: after another 10 s nothing is left.
    assert.equal(r.perSecond(30_500), 0)
    // Half a window of 40 rows/s after the silence.
    for (let t = 30_500; t < 35_500; t += 25) r.add(t, 1)
    assert.ok(Math.abs(r.perSecond(35_500) - 20) < 1.5, String(r.perSecond(35_500)))
  })

  it('sustained rows: slots × best size ÷ (slow time + trip), the size halved to fit half the deadline', () => {
    const m = new LatencyModel({ reprobeEvery: 1_000_000 })
    assert.equal(sustainedRate(m, { slots: 2, maxBatchSize: 8, deadlineMs: 1000, overheadMs: 0 }), undefined)
    for (let i = 0; i < 15; i++) {
      m.observe(1, 4)
      m.observe(2, 5)
      m.observe(4, 6)
      m.observe(8, 8)
    }
    // Best size 8 (1 row/ms): 2 workers × 8 rows / (8 + 2) ms = 1600 rows/s.
    assert.equal(sustainedRate(m, { slots: 2, maxBatchSize: 8, deadlineMs: 1000, overheadMs: 2 }), 1600)
    // A 12 ms deadline leaves 6 ms for a batch: size 4 (6 ms), 2 × 4 / 6 ms ≈ 1333 rows/s.
    const tight = sustainedRate(m, { slots: 2, maxBatchSize: 8, deadlineMs: 12, overheadMs: 0 })!
    assert.ok(Math.abs(tight - 1333.3) < 1, String(tight))
  })

  it('a light load measured small batches only: the next size up counts, extrapolated, and no further', () => {
    // A device: 20 ms a batch + 0.25 ms a row, seen at 1 and 2 rows only (a trickle of requests).
    const m = new LatencyModel({ reprobeEvery: 1_000_000 })
    for (let i = 0; i < 15; i++) m.observe(1, 20.25), m.observe(2, 20.5)
    // 4 rows ≈ 21 ms: ~190 rows/s, not the 2 rows / 20.5 ms ≈ 98 rows/s measured so far ...
    const light = sustainedRate(m, { slots: 1, maxBatchSize: 16, deadlineMs: 1000, overheadMs: 0 })!
    assert.ok(Math.abs(light - 4000 / 21) < 1, String(light))
    // ... and once 4 is measured, 8 is the next guess — never 16 from the same trend.
    for (let i = 0; i < 15; i++) m.observe(4, 21)
    const more = sustainedRate(m, { slots: 1, maxBatchSize: 16, deadlineMs: 1000, overheadMs: 0 })!
    assert.ok(Math.abs(more - 8000 / 22) < 1, String(more))
  })

  it("a dispatcher's load ratio follows the offered rate: ~0.5 at half its capacity, ~2 at twice", async () => {
    const clock = new FakeClock()
    // 10 ms a batch of up to 4 rows, one slot: it sustains 400 rows/s within the deadline.
    const r = runner(clock, () => 10)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 4, deadlineMs: 1000, slots: 1, clock, model: trained(() => 10, 4) },
      r.execute,
    )
    const offer = async (perSecond: number, seconds: number) => {
      const gap = 1000 / perSecond
      for (let i = 0; i < perSecond * seconds; i++) {
        d.submit({ id: String(i) }, 1).catch(() => undefined)
        await clock.advance(gap)
      }
    }
    await offer(200, 12)
    const half = d.load()
    assert.ok(Math.abs(half.offeredPerSecond - 200) < 5, JSON.stringify(half))
    assert.ok(half.ratio !== undefined && half.ratio > 0.3 && half.ratio < 0.7, JSON.stringify(half))
    await offer(800, 12)
    const twice = d.load()
    assert.ok(Math.abs(twice.offeredPerSecond - 800) < 20, JSON.stringify(twice))
    assert.ok(twice.ratio !== undefined && twice.ratio > 1.5 && twice.ratio < 2.5, JSON.stringify(twice))
    d.close()
  })

  it('requests refused before their body is read count as offered, once; a question (admits) does not', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 10)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 4, deadlineMs: 200, slots: 1, clock, model: trained(() => 10, 4) },
      r.execute,
    )
    // As the server does: ask first (a refusal answers at once), submit only what is admitted.
    let refusedEarly = 0
    for (let i = 0; i < 800 * 12; i++) {
      d.admits() // a question only: never counted
      if (d.refusal(1)) refusedEarly++
      else d.submit({ id: String(i) }, 1).catch(() => undefined)
      await clock.advance(1000 / 800)
    }
    const load = d.load()
    assert.ok(refusedEarly > 1000, `the queue must have refused early: ${refusedEarly}`)
    assert.ok(Math.abs(load.offeredPerSecond - 800) < 20, JSON.stringify(load))
    assert.ok(load.ratio !== undefined && load.ratio > 1.5 && load.ratio < 2.5, JSON.stringify(load))
    d.close()
  })

  it("the API process's busy share: over the last window, from marks taken at each read", () => {
    let now = 0
    const t = { idle: 0, active: 0 }
    const pass = (ms: number, busy: number) => {
      now += ms
      t.active += ms * busy
      t.idle += ms * (1 - busy)
    }
    const loop = new LoopBusy(
      () => ({ ...t }),
      () => now,
      10_000,
    )
    // Start-up was busy: the first read only marks where the window starts.
    pass(5000, 1)
    assert.equal(loop.read(), 0)
    // Read every second: 20 s a quarter busy, then 10 s fully busy.
    for (let i = 0; i < 20; i++) {
      pass(1000, 0.25)
      assert.ok(Math.abs(loop.read() - 0.25) < 1e-9)
    }
    for (let i = 0; i < 10; i++) pass(1000, 1), loop.read()
    assert.ok(Math.abs(loop.read() - 1) < 1e-9, 'the window holds only the busy seconds')
    // Read once a minute (a slow scrape): the share since the last read.
    pass(60_000, 0.5)
    assert.ok(Math.abs(loop.read() - 0.5) < 1e-9)
  })
})
