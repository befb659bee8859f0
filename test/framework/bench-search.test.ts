import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { better, dimensions, ranked, search, type Candidate, type Score } from '../../framework/client/bench/search.js'

// bundle tune's search on a synthetic deployment whose best settings are known: it must find
// them, measure far fewer candidates than the grid, honour the latency bound, and stop when
// time runs out.

const START: Candidate = {
  workers: 1,
  intraOpThreads: 1,
  maxBatchSize: 32,
  maxDelayMs: 0,
  isolation: 'process',
  batchesPerWorker: 2,
}

/**
 * Goodput peaks at batch 16, 2 workers, 1 thread each, a 2 ms window, thread isolation and 2
 * batches per worker (1 leaves the worker idle between batches, 3 only adds queueing);
 * p99 grows with the batch and the window.
 */
function synthetic(c: Candidate, p99Bound = Infinity): Score {
  const batch = 1000 / (1 + Math.abs(Math.log2(c.maxBatchSize / 16)))
  const workers = c.workers === 2 ? 1 : 0.8
  const threads = c.intraOpThreads === 1 ? 1 : 0.9
  const window = c.maxDelayMs === 2 ? 1.1 : c.maxDelayMs === 1 || c.maxDelayMs === 5 ? 1.05 : 1
  const iso = c.isolation === 'thread' ? 1.06 : 1
  const held = c.batchesPerWorker === 2 ? 1 : 0.95
  const goodput = batch * workers * threads * window * iso * held
  const p99 = 5 + c.maxBatchSize * 2 + c.maxDelayMs * 3
  return { feasible: p99 <= p99Bound, goodput, p99, concurrency: 16 }
}

describe('bundle tune: the search', () => {
  it('finds the best settings of a known deployment with a fraction of the grid', async () => {
    const evaluated: Candidate[] = []
    const trials = await search({
      start: START,
      cores: 2,
      evaluate: async (c) => (evaluated.push(c), synthetic(c)),
      outOfTime: () => false,
    })
    const best = ranked(trials)[0]!
    assert.deepEqual(best.candidate, {
      workers: 2,
      intraOpThreads: 1,
      maxBatchSize: 16,
      maxDelayMs: 2,
      isolation: 'thread',
      batchesPerWorker: 2,
    })
    const d = dimensions({ cores: 2, start: START })
    const grid =
      d.maxBatchSize.length *
      d.workers.length *
      d.intraOpThreads.length *
      d.maxDelayMs.length *
      2 *
      d.batchesPerWorker.length
    assert.ok(evaluated.length < grid / 5, `${evaluated.length} of ${grid}`)
    assert.equal(new Set(evaluated.map((c) => JSON.stringify(c))).size, evaluated.length, 'no candidate twice')
  })

  it('a p99 bound: the best is the fastest that meets it, and meeting it beats any speed', async () => {
    const trials = await search({
      start: START,
      cores: 2,
      evaluate: async (c) => synthetic(c, 30),
      outOfTime: () => false,
    })
    const best = ranked(trials)[0]!
    assert.equal(best.score.feasible, true)
    assert.ok(best.score.p99 <= 30)
    assert.equal(best.candidate.maxBatchSize, 8, 'batch 16 would break the bound (p99 37 ms)')
    assert.equal(
      better(
        { feasible: true, goodput: 1, p99: 1, concurrency: 1 },
        { feasible: false, goodput: 1e6, p99: 1, concurrency: 1 },
      ),
      true,
    )
  })

  it('never tries a batch smaller than the rows one request carries', async () => {
    const tried: number[] = []
    await search({
      start: START,
      cores: 2,
      minBatch: 8,
      evaluate: async (c) => (
        tried.push(c.maxBatchSize), synthetic({ ...c, maxBatchSize: Math.max(c.maxBatchSize, 64) })
      ),
      outOfTime: () => false,
    })
    assert.ok(Math.min(...tried) >= 8, tried.join(','))
  })

  it('stops when time runs out, keeping what it measured', async () => {
    let n = 0
    const trials = await search({
      start: START,
      cores: 4,
      evaluate: async (c) => (n++, synthetic(c)),
      outOfTime: () => n >= 5,
    })
    assert.equal(trials.length, 5)
    assert.deepEqual(trials[0]!.candidate, START, 'the starting settings are measured first')
  })

  it('a candidate cut short by the budget is not counted', async () => {
    let n = 0
    const trials = await search({
      start: START,
      cores: 2,
      evaluate: async (c) => (++n === 3 ? undefined : synthetic(c)),
      outOfTime: () => false,
    })
    assert.equal(trials.length, 2)
  })
})
