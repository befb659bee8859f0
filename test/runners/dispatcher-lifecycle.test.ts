import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { Dispatcher } from '../../runners/batching/dispatcher.js'
import { FakeClock } from '../utils/fake-clock.js'
import { type Payload, sliceRunner as runner, trained } from '../utils/sim-runner.js'

// Why requests are shed, draining, batching turned off, and a batch that fails, on fake time.

describe('Dispatcher (fake time): shedding reasons, drain, failures', () => {
  it('names why it shed: admission on arrival, deadline after waiting, queue_full at the memory bound', async () => {
    const clock = new FakeClock()
    const cost = (n: number) => 20 + 5 * n
    const r = runner(clock, cost)
    const reasons: string[] = []
    const observer = { batch: () => undefined, rejected: (why: string) => void reasons.push(why) }
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 4, maxLatencyMs: 100, slots: 1, clock, model: trained(cost, 4), maxQueueSize: 3, observer },
      r.execute,
    )
    const all: Promise<unknown>[] = []
    all.push(d.submit({ id: 'first' }, 1).catch(() => undefined)) // runs at once: the slot is busy now
    all.push(d.submit({ id: 'big' }, 13).catch(() => undefined)) // 13 rows behind it cannot finish in time
    // 3 wait, the rest find the queue full
    for (let i = 0; i < 20; i++) all.push(d.submit({ id: `r${i}` }, 1).catch(() => undefined))
    await clock.advance(1000)
    await Promise.all(all)
    assert.ok(reasons.includes('admission'), `reasons: ${reasons}`)
    assert.ok(reasons.includes('queue_full'), `reasons: ${reasons}`)
    // A request admitted behind a batch that then ran slow waits past its bound and is shed late.
    const slow = new FakeClock()
    let first = true
    const late: string[] = []
    const d2 = new Dispatcher<Payload, string>(
      {
        maxBatchSize: 1,
        maxLatencyMs: 100,
        slots: 1,
        clock: slow,
        model: trained(() => 10, 1),
        observer: { batch: () => undefined, rejected: (why) => void late.push(why) },
      },
      (slices) =>
        new Promise((res) =>
          slow.setTimeout(() => res(slices.map((s) => s.payload.id)), first ? ((first = false), 150) : 10),
        ),
    )
    const a = d2.submit({ id: 'a' }, 1)
    const b = d2.submit({ id: 'b' }, 1).catch((e: BundleError) => e.code)
    const c = d2.submit({ id: 'c' }, 1).catch((e: BundleError) => e.code)
    await slow.advance(500)
    assert.equal((await a)[0], 'a')
    assert.equal(await b, 'E_RUNNER_OVERLOADED')
    assert.equal(await c, 'E_RUNNER_OVERLOADED')
    assert.deepEqual(late, ['deadline', 'deadline'])
  })

  it('drain: runs everything queued at once, refuses new requests, resolves when the last batch is done', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 10)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 2, maxLatencyMs: 1000, slots: 1, clock, model: trained(() => 10, 2) },
      r.execute,
    )
    const queued = ['a', 'b', 'c', 'd', 'e'].map((id) => d.submit({ id }, 1))
    let drained = false
    const done = d.drain().then(() => (drained = true))
    const again = d.drain() // a second caller (stop after a swap) waits for the same end
    await assert.rejects(d.submit({ id: 'late' }, 1), (e: BundleError) => e.code === 'E_RUNNER_STOPPED')
    await clock.advance(25)
    assert.equal(drained, false, 'batches are still running')
    await clock.advance(100)
    await done
    await again
    assert.deepEqual((await Promise.all(queued)).flat(), ['a:0-1', 'b:0-1', 'c:0-1', 'd:0-1', 'e:0-1'])
    assert.equal(d.stats().inFlight, 0)
  })

  it('batching off: every request runs alone in arrival order', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 1)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 8, maxLatencyMs: 1000, slots: 1, clock, batching: false },
      r.execute,
    )
    const all = ['a', 'b', 'c'].map((id) => d.submit({ id }, 2))
    await clock.advance(10)
    await Promise.all(all)
    assert.deepEqual(
      r.batches.map((b) => b.slices),
      [['a[0+2]'], ['b[0+2]'], ['c[0+2]']],
    )
  })

  it('a failed batch fails exactly its requests, including the unsent rest of a split one', async () => {
    const clock = new FakeClock()
    let calls = 0
    const d = new Dispatcher<Payload, string>({ maxBatchSize: 2, maxLatencyMs: 1000, slots: 1, clock }, (slices) => {
      calls++
      return calls === 1
        ? Promise.reject(new BundleError('E_RUNNER_CRASHED', 'worker died'))
        : Promise.resolve(slices.map((s) => s.payload.id))
    })
    const big = assert.rejects(d.submit({ id: 'big' }, 3), (e: BundleError) => e.code === 'E_RUNNER_CRASHED')
    const other = d.submit({ id: 'other' }, 1, 'k2')
    await clock.advance(10)
    await big
    assert.deepEqual(await other, ['other'])
    assert.equal(d.stats().queuedRows, 0)
  })
})
