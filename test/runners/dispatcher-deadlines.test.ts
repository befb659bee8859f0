// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { fileURLToPath } from 'node:url'
import { Dispatcher, type Execute } from '../../runners/batching/dispatcher.js'
import { PRIORITY } from '../../runners/batching/priority.js'
import { FakeClock } from '../utils/fake-clock.js'
import { inThread } from '../utils/in-thread.js'
import { type Payload, trained } from '../utils/sim-runner.js'
import { closedLoop, compute } from './deadline-sims.js'
import type * as sims from './deadline-sims.js'

// The batch window, deadlines, priorities, and the overload loop that used to collapse goodput,
// all on fake time.

const SIMS = fileURLToPath(new URL('./deadline-sims.ts', import.meta.url))
type Sims = typeof sims
/** A scenario of deadline-sims.ts (seconds of work even on fake time), run in a thread: see in-thread.ts. */
const sim = <K extends 'overloadLoop' | 'pacedRefusals' | 'driftingWorker'>(name: K, ...args: Parameters<Sims[K]>) =>
  inThread<Awaited<ReturnType<Sims[K]>>>(SIMS, name, args)

/** A runner whose batch of n rows computes cost(n) ms and reports it; records who ran. */
function runner(clock: FakeClock, cost: (rows: number) => number) {
  const ran = new Set<string>()
  const batches: { rows: number; ids: string[]; at: number }[] = []
  const execute: Execute<Payload, string> = (slices, rows, report) =>
    new Promise((resolve) => {
      for (const s of slices) ran.add(s.payload.id)
      batches.push({ rows, ids: slices.map((s) => s.payload.id), at: clock.now() })
      clock.setTimeout(() => {
        report(cost(rows))
        resolve(slices.map((s) => s.payload.id))
      }, cost(rows))
    })
  return { ran, batches, execute }
}

describe('Dispatcher: batch window, deadlines, priorities (fake time)', () => {
  it(
    'the batch window is not a deadline: 32 clients on a runner that serves them within its default deadline get ' +
      'no refusal',
    async () => {
      const clock = new FakeClock()
      // 1.2 ms a row alone, cheaper per row in batches (as the cls model on 2 cores).
      const cost = (n: number) => 1 + 0.6 * n
      const r = runner(clock, cost)
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 32, maxDelayMs: 5, slots: 1, clock, model: trained(cost, 32) },
        r.execute,
      )
      const { ok, refused } = await closedLoop(clock, 32, 2_000, (id) => d.submit({ id }, 1))
      assert.equal(refused, 0, 'the default deadline (10 s) serves a load the runner finishes in ~20 ms')
      assert.ok(ok > (2_000 / cost(32)) * 32 * 0.9, `served ${ok}: near the runner's batched capacity`)
      assert.ok(
        r.batches.slice(10).every((b) => b.rows >= 16),
        `full batches under load: ${r.batches.slice(10, 30).map((b) => b.rows)}`,
      )
    },
  )

  it('holds a request at most maxDelayMs to fill a batch, and not at all with nothing else coming', async () => {
    // Arrivals every 3 ms on a runner whose batches cost 20 ms + 0.5 ms a row, so bigger
    // batches pay and the batcher is tempted to wait for rows: when a batch ends with rows
    // queued, the runner may stand idle at most the 2 ms window before the next batch.
    const clock = new FakeClock()
    const cost = (n: number) => 20 + 0.5 * n
    const r = runner(clock, cost)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 8, maxDelayMs: 2, slots: 1, clock, model: trained(cost, 8) },
      r.execute,
    )
    const all: Promise<unknown>[] = []
    for (let i = 0; i < 300; i++) {
      all.push(d.submit({ id: `r${i}` }, 1))
      await clock.advance(3)
    }
    await clock.advance(2_000)
    await Promise.all(all)
    const idle = r.batches.slice(1).map((b, i) => b.at - (r.batches[i]!.at + cost(r.batches[i]!.rows)))
    assert.ok(Math.max(...idle) <= 2 + 1e-9, `never held past the 2 ms window: ${idle}`)
    // Alone: runs on arrival.
    const quiet = new FakeClock()
    const ri = runner(quiet, (n) => 10 + n)
    const di = new Dispatcher<Payload, string>(
      { maxBatchSize: 8, maxDelayMs: 50, slots: 1, clock: quiet, model: trained((n) => 10 + n, 8) },
      ri.execute,
    )
    void di.submit({ id: 'alone' }, 1)
    await quiet.settle()
    assert.deepEqual(
      ri.batches.map((b) => b.at),
      [0],
      'an idle runner with nothing coming does not wait',
    )
  })

  it(
    "a request's own deadline only shortens the runner's: behind 50 ms of work, a 20 ms caller is refused on " +
      'arrival, a patient one is served',
    async () => {
      const clock = new FakeClock()
      const cost = (n: number) => 10 * n
      const r = runner(clock, cost)
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 1, deadlineMs: 1_000, slots: 1, clock, model: trained(cost, 1) },
        r.execute,
      )
      const queued = [0, 1, 2, 3, 4].map((i) => d.submit({ id: `q${i}` }, 1))
      const hurried = d.submit({ id: 'hurried' }, 1, { deadline: clock.now() + 20 }).catch((e: BundleError) => e.code)
      const patient = d.submit({ id: 'patient' }, 1, { deadline: clock.now() + 5_000 })
      await clock.advance(1_000)
      assert.equal(await hurried, 'E_RUNNER_OVERLOADED')
      assert.deepEqual(await patient, ['patient'])
      await Promise.all(queued)
      assert.equal(r.ran.has('hurried'), false, 'a refused request never runs')
    },
  )

  it(
    'a refused request is never run: under 10× overload ' + 'every request either ran in time or was never executed',
    async () => {
      const clock = new FakeClock()
      const cost = (n: number) => 20 + 5 * n
      const r = runner(clock, cost)
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 4, deadlineMs: 100, slots: 1, clock, model: trained(cost, 4) },
        r.execute,
      )
      const refused: string[] = []
      const all: Promise<unknown>[] = []
      for (let i = 0; i < 300; i++) {
        const id = `r${i}`
        all.push(d.submit({ id }, 1).catch(() => refused.push(id)))
        await clock.advance(0.4)
      }
      await clock.advance(2_000)
      await Promise.all(all)
      assert.ok(refused.length > 150, `overload was refused (${refused.length})`)
      assert.deepEqual(
        refused.filter((id) => r.ran.has(id)),
        [],
        'no refused request was executed',
      )
    },
  )

  it('more urgent priority levels are batched first', async () => {
    const clock = new FakeClock()
    const cost = () => 10
    const r = runner(clock, cost)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 2, deadlineMs: 10_000, slots: 1, clock, model: trained(cost, 2) },
      r.execute,
    )
    const all = [
      d.submit({ id: 'hold' }, 1), // takes the slot
      d.submit({ id: 'low1' }, 1, { priority: PRIORITY.low }),
      d.submit({ id: 'low2' }, 1, { priority: PRIORITY.low }),
      d.submit({ id: 'norm' }, 1),
      d.submit({ id: 'high1' }, 1, { priority: PRIORITY.high }),
      d.submit({ id: 'high2' }, 1, { priority: 1 }),
    ]
    await clock.advance(1_000)
    await Promise.all(all)
    assert.deepEqual(
      r.batches.map((b) => b.ids),
      [['hold'], ['high1', 'high2'], ['norm', 'low1'], ['low2']],
    )
  })

  it(
    'admission counts only the work at the same level or above: a high-priority request is admitted past a ' +
      'low-priority backlog',
    async () => {
      const clock = new FakeClock()
      const cost = () => 10
      const r = runner(clock, cost)
      // 10 ms a request, 40.5 ms of budget: one running and three waiting fill the low level.
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 1, deadlineMs: 45, slots: 1, clock, model: trained(cost, 1) },
        r.execute,
      )
      const low = Array.from({ length: 4 }, (_, i) =>
        d.submit({ id: `low${i}` }, 1, { priority: PRIORITY.low }).catch(() => 'shed'),
      )
      assert.equal(d.admits(1, { priority: PRIORITY.low }), false, 'no room left at the low level')
      assert.equal(d.admits(1, { priority: PRIORITY.high }), true)
      const high = d.submit({ id: 'high' }, 1, { priority: PRIORITY.high })
      await clock.advance(1_000)
      assert.deepEqual(await high, ['high'])
      assert.equal(r.batches[1]!.ids[0], 'high', 'it ran next')
      await Promise.all(low)
    },
  )

  it('a caller that goes away leaves the queue; its rows are never run', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 10)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 1, deadlineMs: 1_000, slots: 1, clock, model: trained(() => 10, 1) },
      r.execute,
    )
    const hold = d.submit({ id: 'hold' }, 1)
    const gone = new AbortController()
    const left = d.submit({ id: 'left' }, 1, { signal: gone.signal }).catch((e: BundleError) => e.code)
    gone.abort()
    assert.equal(await left, 'E_HTTP_CLIENT_CLOSED')
    assert.equal(d.stats().queuedRequests, 0)
    await clock.advance(100)
    await hold
    assert.equal(r.ran.has('left'), false)
  })
})

describe('the overload loop that collapsed goodput (fake time)', () => {
  // The scenario, and the real server it reproduces: overloadLoop in deadline-sims.ts.
  const served = (...args: Parameters<Sims['overloadLoop']>) => sim('overloadLoop', ...args)

  it(
    'learning compute time from the runner and handing the next batch over early keep goodput under forced ' +
      'shedding at ≥ 80% of a loose deadline',
    async () => {
      const loose = await served(10_000, true, 2)
      const tight = await served(20, true, 2)
      const before = await served(20, false, 1)
      assert.ok(
        tight.perSecond >= 0.8 * loose.perSecond,
        `tight ${tight.perSecond.toFixed(0)}/s vs loose ${loose.perSecond.toFixed(0)}/s`,
      )
      // The cause, reproduced: learned from the round trip, one row looks 8× slower than it is,
      // nearly everything is refused, and what runs goes one row at a time.
      assert.ok(
        before.estimate1 > 5 * compute(1),
        `round-trip estimate ${before.estimate1.toFixed(1)} ms for a ${compute(1)} ms row`,
      )
      assert.ok(
        before.perSecond < 0.25 * tight.perSecond,
        `the old way collapses: ${before.perSecond.toFixed(0)}/s vs ${tight.perSecond.toFixed(0)}/s`,
      )
      assert.ok(
        before.rowsPerBatch < 2 && tight.rowsPerBatch > 4,
        `batch sizes: before ${before.rowsPerBatch.toFixed(1)}, now ${tight.rowsPerBatch.toFixed(1)}`,
      )
    },
  )
})

describe('refusals that rejoin the queue at once (fake time)', () => {
  // The scenario, and the real server it reproduces: pacedRefusals in deadline-sims.ts.
  const served = (...args: Parameters<Sims['pacedRefusals']>) => sim('pacedRefusals', ...args)

  it(
    'refusals are answered when the queue can have moved (a shed request after half its deadline): goodput stays ' +
      '≥ 80% of a loose deadline',
    async () => {
      const loose = await served(10_000, true)
      const tight = await served(20, true)
      const atOnce = await served(20, false)
      assert.ok(
        tight.perSecond >= 0.8 * loose.perSecond,
        `paced: ${tight.perSecond.toFixed(0)}/s vs loose ${loose.perSecond.toFixed(0)}/s`,
      )
      assert.ok(
        tight.paces.length > 0 && tight.paces.every((p) => p > 0 && p <= 50),
        `paces ${Math.min(...tight.paces).toFixed(2)}–${Math.max(...tight.paces).toFixed(2)} ms`,
      )
      assert.ok(
        tight.paces.some((p) => p >= 10),
        'sheds wait at least half the deadline',
      )
      // Answered at once, refused clients rejoin the queue and refusals grow (each a body read
      // for the API process). Before the dispatcher's model of the worker was corrected on each
      // answer (see below), this collapsed goodput to 0.4× of the paced one; now pacing only
      // spares the refusals.
      assert.ok(
        atOnce.refusedPerServed > 1.3 * tight.refusedPerServed,
        `refusals per served: at once ${atOnce.refusedPerServed.toFixed(2)}, paced ` +
          `${tight.refusedPerServed.toFixed(2)}`,
      )
      assert.ok(
        atOnce.perSecond >= 0.8 * loose.perSecond,
        `at once ${atOnce.perSecond.toFixed(0)}/s vs loose ${loose.perSecond.toFixed(0)}/s`,
      )
    },
  )
})

describe('expected worker ends that drift ahead of the worker (fake time)', () => {
  // The scenario, and the real server it reproduces: driftingWorker in deadline-sims.ts.
  const served = (...args: Parameters<Sims['driftingWorker']>) => sim('driftingWorker', ...args)

  for (const [every, factor, lag] of [
    [3, 3, 0],
    [5, 2.5, 3],
  ] as const)
    it(`a tight deadline still batches when every ${every}th batch is ${factor}× slower (${lag} ms back)`, async () => {
      const loose = await served(10_000, every, factor, lag)
      const tight = await served(20, every, factor, lag)
      // Under 20 ms the slow batches forbid the loose deadline's big ones: 0.74× and 0.82× here.
      assert.ok(
        tight.perSecond >= 0.7 * loose.perSecond,
        `tight ${tight.perSecond.toFixed(0)}/s vs loose ${loose.perSecond.toFixed(0)}/s`,
      )
      assert.ok(tight.rowsPerBatch >= 2, `${tight.rowsPerBatch.toFixed(1)} rows a batch`)
    })
})
