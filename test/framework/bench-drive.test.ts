import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { measureStep, type Load, type Sender } from '../../framework/client/bench/drive.js'
import { parseRange } from '../../framework/client/bench/range.js'
import { isStable, quantile, summarize, type Outcome, type WindowStats } from '../../framework/client/bench/stats.js'
import { FakeClock } from '../utils/fake-clock.js'

// bundle bench's measurement, on fake time: the sweep's steps, the statistics of a window,
// perf_analyzer's stability rule, and the closed and open loops driving a fake server.

const OK: Outcome = { ok: true, code: '200' }
const SHED: Outcome = { ok: false, code: 'E_RUNNER_OVERLOADED', refused: true }

/** Runs a step to its end, moving fake time in 1 ms ticks. */
async function run(clock: FakeClock, send: Sender, load: Load, o: Partial<Parameters<typeof measureStep>[2]> = {}) {
  let result: Awaited<ReturnType<typeof measureStep>> | undefined
  const p = measureStep(send, load, { clock, warmupMs: 100, windowMs: 1000, maxWindows: 6, ...o }).then(
    (r) => void (result = r),
  )
  while (result === undefined) await clock.advance(1)
  await p
  return result
}

/** A server that answers each request after `ms` of fake time. */
const after =
  (clock: FakeClock, ms: number | (() => number), outcome: () => Outcome = () => OK): Sender =>
  () =>
    new Promise((r) => clock.setTimeout(() => r(outcome()), typeof ms === 'number' ? ms : ms()))

/** A server with one worker: requests queue and run one at a time, `ms` each. */
function oneWorker(clock: FakeClock, ms: number): Sender {
  let free = 0
  return () => {
    const start = Math.max(free, clock.now())
    free = start + ms
    return new Promise((r) => clock.setTimeout(() => r(OK), free - clock.now()))
  }
}

describe('bench: sweep ranges', () => {
  it('one value, linear and geometric steps, the end always measured', () => {
    assert.deepEqual(parseRange('--concurrency', '8'), [8])
    assert.deepEqual(parseRange('--concurrency', '1:4'), [1, 2, 3, 4])
    assert.deepEqual(parseRange('--rate', '50:400:50'), [50, 100, 150, 200, 250, 300, 350, 400])
    assert.deepEqual(parseRange('--concurrency', '1:64:x2'), [1, 2, 4, 8, 16, 32, 64])
    assert.deepEqual(parseRange('--concurrency', '1:48:x2'), [1, 2, 4, 8, 16, 32, 48])
    assert.deepEqual(parseRange('--rate', '100:250:100'), [100, 200, 250])
    assert.deepEqual(parseRange('--concurrency', '1:10:x1.5', { integer: true }), [1, 2, 3, 5, 8, 10])
  })

  it('bad ranges are usage errors that say what to write', () => {
    for (const bad of ['0', 'x', '8:4', '1:64:x1', '1:2:3:4', '1:', '1:100000:1'])
      assert.throws(
        () => parseRange('--concurrency', bad),
        (e: any) => e.code === 'E_CLI_USAGE' && /START:END:xFACTOR/.test(e.message),
        bad,
      )
  })
})

describe('bench: window statistics and the stability rule', () => {
  it('goodput counts successes only; refusals and errors by code; latency of successes', () => {
    const answers = [
      ...Array.from({ length: 98 }, (_, i) => ({ outcome: OK, ms: i + 1 })),
      { outcome: SHED, ms: 0.5 },
      { outcome: { ok: false, code: 'E_INTERNAL' }, ms: 900 },
    ]
    const w = summarize(answers, 2000)
    assert.equal(w.answered, 100)
    assert.equal(w.goodput, 49)
    assert.equal(w.throughput, 50)
    assert.equal(w.refused, 1)
    assert.equal(w.errors, 1)
    assert.deepEqual(w.codes, { 200: 98, E_RUNNER_OVERLOADED: 1, E_INTERNAL: 1 })
    assert.equal(w.p50, 49)
    assert.equal(w.p99, 98, 'the 900 ms error is not a latency of the service')
    assert.equal(quantile([], 0.99), 0)
  })

  it('stable when the last three windows are within 10% in goodput and p99', () => {
    const w = (goodput: number, p99: number) => ({ goodput, p99 }) as WindowStats
    assert.equal(isStable([w(100, 10), w(100, 10)]), false, 'fewer than three windows')
    assert.equal(isStable([w(50, 30), w(100, 10), w(105, 10.5), w(97, 9.6)]), true, 'only the last three count')
    assert.equal(isStable([w(100, 10), w(100, 10), w(125, 10)]), false, 'goodput apart')
    assert.equal(isStable([w(100, 10), w(100, 14), w(100, 10)]), false, 'p99 apart')
    assert.equal(isStable([w(0, 0), w(0, 0), w(0, 0)]), true, 'nothing served, steadily')
  })
})

describe('bench: the load loops on fake time', () => {
  it('closed loop: 4 clients of a 10 ms server make 400/s, stable after three windows', async () => {
    const clock = new FakeClock()
    const r = await run(clock, after(clock, 10), { mode: 'concurrency', value: 4 })
    assert.equal(r.stable, true)
    assert.equal(r.windows, 3)
    assert.ok(Math.abs(r.stats.goodput - 400) <= 4, String(r.stats.goodput))
    assert.equal(r.stats.p50, 10)
    assert.equal(r.stats.p99, 10)
  })

  it('a server that keeps slowing is never stable: the step ends at maxWindows, marked unstable', async () => {
    const clock = new FakeClock()
    const r = await run(
      clock,
      after(clock, () => 5 + clock.now() / 50),
      { mode: 'concurrency', value: 2 },
    )
    assert.equal(r.stable, false)
    assert.equal(r.windows, 6)
  })

  it('refusals are answers but not goodput', async () => {
    const clock = new FakeClock()
    let n = 0
    const r = await run(
      clock,
      after(clock, 10, () => (n++ % 2 ? SHED : OK)),
      { mode: 'concurrency', value: 2 },
    )
    assert.ok(Math.abs(r.stats.goodput - 100) <= 2, String(r.stats.goodput))
    assert.ok(Math.abs(r.stats.throughput - 200) <= 2)
    assert.ok(r.stats.refused > 0 && r.stats.errors === 0)
  })

  it('open loop, constant and Poisson arrivals: the rate asked for, whatever the latency', async () => {
    const clock = new FakeClock()
    const constant = await run(clock, after(clock, 30), { mode: 'rate', value: 200, arrivals: 'constant' })
    assert.ok(Math.abs(constant.stats.goodput - 200) <= 2, String(constant.stats.goodput))
    assert.equal(constant.stats.p99, 30)
    let seed = 42
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
    const poisson = await run(
      clock,
      after(clock, 30),
      { mode: 'rate', value: 200, arrivals: 'poisson' },
      { random, maxWindows: 10, tolerance: 0.2 },
    )
    assert.ok(Math.abs(poisson.stats.goodput - 200) <= 30, String(poisson.stats.goodput))
  })

  it('open loop past capacity: latency counts from when a request was due, so the backlog shows', async () => {
    const clock = new FakeClock()
    // 100/s of capacity, 200/s asked: each window the queue grows by 100 requests (a second of wait).
    const r = await run(clock, oneWorker(clock, 10), { mode: 'rate', value: 200, arrivals: 'constant' })
    assert.equal(r.stable, false)
    assert.ok(Math.abs(r.stats.goodput - 100) <= 2, String(r.stats.goodput))
    assert.ok(r.stats.p99 > 2000, `p99 ${r.stats.p99} ms shows the wait`)
    assert.ok(r.maxInFlight > 500)
  })
})
