// Long simulations of the dispatcher on fake time (32 closed-loop clients for 3 s: hundreds of
// thousands of timers), run by dispatcher-deadlines.test.ts in a worker thread (test/utils/in-thread.ts)
// and the closed loop it also uses directly. Each scenario reproduces a collapse measured on a real
// server; the comment above it says which.
import { Dispatcher, refusalPace, type Execute } from '../../runners/batching/dispatcher.js'
import { FakeClock } from '../utils/fake-clock.js'
import type { Payload } from '../utils/sim-runner.js'

/** The simulated worker's compute time for a batch of n rows: 1.2 ms a row alone, cheaper in batches. */
export const compute = (n: number) => 1 + 0.6 * n

/** `n` closed-loop clients that resend the moment they are answered, refused or not, for `ms`. */
export async function closedLoop(
  clock: FakeClock,
  n: number,
  ms: number,
  submit: (id: string) => Promise<unknown>,
): Promise<{ ok: number; refused: number }> {
  const counts = { ok: 0, refused: 0 }
  let stop = false
  const client = async (c: number) => {
    for (let i = 0; !stop; i++) {
      const ok = await submit(`c${c}-${i}`).then(
        () => true,
        () => false,
      )
      counts[ok ? 'ok' : 'refused']++
      // The next request leaves 0.05 ms after the answer, refused or not (the network).
      await new Promise<void>((res) => clock.setTimeout(res, 0.05))
    }
  }
  const clients = Array.from({ length: n }, (_, c) => client(c))
  await clock.advance(ms)
  stop = true
  await clock.advance(1_000)
  await Promise.all(clients)
  return counts
}

/**
 * One simulated worker running what it is handed in order: the `n`th batch (from 1) of `rows` rows
 * computes `took(rows, n)` ms; its answer reaches the batcher `lagMs` after it finished, with the
 * compute time reported unless `reportCompute` is false.
 */
export function oneWorker(
  clock: FakeClock,
  took: (rows: number, n: number) => number,
  lagMs = 0,
  reportCompute = true,
) {
  let freeAt = 0
  const stats = { batches: 0, rows: 0 }
  const execute: Execute<Payload, string> = (slices, rows, report) =>
    new Promise((resolve) => {
      stats.batches++
      stats.rows += rows
      const ms = took(rows, stats.batches)
      freeAt = Math.max(freeAt, clock.now()) + ms
      clock.setTimeout(
        () => {
          if (reportCompute) report(ms)
          resolve(slices.map((s) => s.payload.id))
        },
        freeAt - clock.now() + lagMs,
      )
    })
  return { execute, stats }
}

// Measured on a real server (32 wrk connections resending at once on /classifyTensor, a 20 ms
// deadline): the worker computed a row in ~1.2 ms, but its answers waited 8 ms (p50) in the API
// process's event loop, which the storm of refusals kept busy. The batcher timed batches from
// the API process, learned ~19 ms a batch, refused nearly everything, and ran batches of one
// row: 50 req/s served of ~800. The same loop on fake time, with the answers' way back delayed
// by a fixed 8 ms: learning from the round trip collapses it; learning from the compute time the
// runner reports, with the next batch already handed to the worker (depth 2), does not.
const LAG_MS = 8

export async function overloadLoop(
  deadlineMs: number,
  reportCompute: boolean,
  depth: number,
): Promise<{ perSecond: number; estimate1: number; rowsPerBatch: number }> {
  const clock = new FakeClock()
  const { execute, stats } = oneWorker(clock, compute, LAG_MS, reportCompute)
  const d = new Dispatcher<Payload, string>({ maxBatchSize: 32, deadlineMs, slots: 1, depth, clock }, execute)
  const { ok } = await closedLoop(clock, 32, 3_000, (id) => d.submit({ id }, 1))
  return { perSecond: ok / 3, estimate1: d.model.estimate(1), rowsPerBatch: stats.rows / stats.batches }
}

// Measured on a real server (quickstart, 32 wrk connections resending at once, 20 and 50 ms
// deadlines): nearly every refusal was a queued request shed at dispatch and answered at once.
// Its client came straight back to the tail of the same queue, so shedding never shortened
// the queue; it only added 2,500–4,000 body reads a second to the API process, whose CPU the
// worker shares (the worker fell from ~80% to ~60% busy; goodput 0.64–0.75× the loose
// deadline's). The same loop on fake time: reading a body costs the API process 0.25 ms,
// answering 0.05 ms; the worker computes 1 + 0.6 ms a row, at half speed while the API process
// has work (they share a core). The server answers a refusal after the pace it carries, when
// that is at most 50 ms (framework/server/call-options.ts).
export async function pacedRefusals(
  deadlineMs: number,
  honourPace: boolean,
): Promise<{ perSecond: number; refusedPerServed: number; paces: number[] }> {
  const clock = new FakeClock()
  let apiFreeAt = 0
  /** Resolves once the API process has spent `ms` on this (one thing at a time). */
  const cpu = (ms: number) => {
    apiFreeAt = Math.max(apiFreeAt, clock.now()) + ms
    return new Promise<void>((res) => clock.setTimeout(res, apiFreeAt - clock.now()))
  }
  let workerFreeAt = 0
  const execute: Execute<Payload, string> = (slices, rows, report) =>
    new Promise((resolve) => {
      const start = Math.max(workerFreeAt, clock.now())
      const took = compute(rows) + Math.min(compute(rows), Math.max(0, apiFreeAt - start))
      workerFreeAt = start + took
      clock.setTimeout(() => {
        report(took)
        resolve(slices.map((s) => s.payload.id))
      }, workerFreeAt - clock.now())
    })
  const d = new Dispatcher<Payload, string>({ maxBatchSize: 32, deadlineMs, slots: 1, depth: 2, clock }, execute)
  const paces: number[] = []
  const { ok, refused } = await closedLoop(clock, 32, 3_000, async (id) => {
    await cpu(0.25)
    try {
      return await d.submit({ id }, 1)
    } catch (err) {
      const pace = refusalPace(err)
      if (pace !== undefined) paces.push(pace)
      if (honourPace && pace !== undefined && pace > 0 && pace <= 50)
        await new Promise<void>((res) => clock.setTimeout(res, pace))
      throw err
    } finally {
      await cpu(0.05)
    }
  })
  return { perSecond: ok / 3, refusedPerServed: refused / Math.max(ok, 1), paces }
}

// Measured on a real server (quickstart, 32 wrk connections resending at once, a 20 ms deadline,
// a slower host): batches' slow (p90) times were 2–3× their typical ones, and the dispatcher's
// model of when the worker would be free only ever moved forward by slow estimates — under load
// the worker was never idle, so nothing pulled it back. It ran 40–56 ms ahead of the real worker,
// every head looked late, and batches of one row served 0.41× the loose deadline's goodput. The
// same on fake time: one worker (depth 2) whose every `every`th batch runs `factor`× slower,
// its answers reaching the batcher `lag` ms after it finished. Before the model was corrected on
// each answer these served 0.46× (one row a batch) and 0.49× of the loose deadline.
export async function driftingWorker(
  deadlineMs: number,
  every: number,
  factor: number,
  lag: number,
): Promise<{ perSecond: number; rowsPerBatch: number }> {
  const clock = new FakeClock()
  const slower = (rows: number, n: number) => compute(rows) * (n % every === 0 ? factor : 1)
  const { execute, stats } = oneWorker(clock, slower, lag)
  const d = new Dispatcher<Payload, string>({ maxBatchSize: 32, deadlineMs, slots: 1, depth: 2, clock }, execute)
  const { ok } = await closedLoop(clock, 32, 3_000, (id) => d.submit({ id }, 1))
  return { perSecond: ok / 3, rowsPerBatch: stats.rows / stats.batches }
}
