import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { Dispatcher } from '../../runners/batching/dispatcher.js'
import { LatencyModel } from '../../runners/batching/latency-model.js'
import { FakeClock } from '../utils/fake-clock.js'
import { type Payload, sliceRunner as runner, trained } from '../utils/sim-runner.js'

describe('Dispatcher (fake time)', () => {
  it(
    'rule 3: caps batches at maxBatchSize rows and splits ' + 'a request that straddles it, reassembled in order',
    async () => {
      const clock = new FakeClock()
      const r = runner(clock, () => 10)
      // Fixed per-batch overhead: full batches of 4 are the most efficient.
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 4, maxLatencyMs: 1000, slots: 1, clock, model: trained((n) => 10 + n, 4) },
        r.execute,
      )
      const hold = d.submit({ id: 'h' }, 1) // occupies the slot: a and b queue up together
      const a = d.submit({ id: 'a' }, 3)
      const b = d.submit({ id: 'b' }, 3)
      await clock.advance(100)
      await hold
      assert.deepEqual(await a, ['a:0-3'], 'a request that fits is never cut')
      const parts = await b
      assert.ok(parts.length >= 2, `b was split: ${parts}`)
      // the parts tile b's rows in order
      let next = 0
      for (const p of parts) {
        const [from, to] = p.slice(2).split('-').map(Number) as [number, number]
        assert.equal(from, next)
        next = to
      }
      assert.equal(next, 3)
      assert.ok(
        r.batches.every((x) => x.rows <= 4),
        `batches: ${r.batches.map((x) => x.rows)}`,
      )
      assert.ok(
        r.batches.some((x) => x.rows === 4 && x.slices[0] === 'a[0+3]' && x.slices[1] === 'b[0+1]'),
        `b straddles the cap of 4 and is split there: ${JSON.stringify(r.batches.map((x) => x.slices))}`,
      )
      assert.equal(
        r.batches.reduce((n, x) => n + x.rows, 0),
        7,
      )
    },
  )

  it('rule 4: requests with different shapes never share a batch', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 5)
    const d = new Dispatcher<Payload, string>({ maxBatchSize: 8, maxLatencyMs: 1000, slots: 1, clock }, r.execute)
    const hold = d.submit({ id: 'first' }, 1, '3x48x192') // occupies the slot so the rest queue up
    const reqs = [
      d.submit({ id: 'x1' }, 1, '3x48x192'),
      d.submit({ id: 'y1' }, 1, '3x48x320'),
      d.submit({ id: 'x2' }, 1, '3x48x192'),
      d.submit({ id: 'y2' }, 1, '3x48x320'),
    ]
    await clock.advance(100)
    await Promise.all([hold, ...reqs])
    for (const batch of r.batches) {
      const shapes = new Set(batch.slices.map((s) => (s.startsWith('x') || s.startsWith('first') ? 'x' : 'y')))
      assert.equal(shapes.size, 1, `mixed batch ${batch.slices}`)
    }
    assert.ok(
      r.batches.some((b) => b.slices.length === 2),
      'same-shape requests were merged',
    )
  })

  it('rule 6: one batch per slot; a freed slot takes the next batch', async () => {
    const clock = new FakeClock()
    const r = runner(clock, () => 10)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 2, maxLatencyMs: 1000, slots: 2, clock, batching: false },
      r.execute,
    )
    const all = ['a', 'b', 'c', 'd'].map((id) => d.submit({ id }, 1))
    await clock.settle()
    assert.equal(d.stats().inFlight, 2)
    assert.deepEqual(
      r.batches.map((b) => b.at),
      [0, 0],
    )
    await clock.advance(10)
    assert.deepEqual(
      r.batches.map((b) => b.at),
      [0, 0, 10, 10],
    )
    await clock.advance(10)
    assert.equal((await Promise.all(all)).length, 4)
  })

  it('rule 1: with slow arrivals it does not wait; with fast arrivals it waits to fill a batch', async () => {
    const cost = (n: number) => 10 + n // fixed overhead: bigger batches are cheaper per row
    const slow = new FakeClock()
    const rs = runner(slow, cost)
    const ds = new Dispatcher<Payload, string>(
      { maxBatchSize: 8, maxLatencyMs: 200, slots: 1, clock: slow, model: trained(cost, 8) },
      rs.execute,
    )
    for (let i = 0; i < 5; i++) {
      void ds.submit({ id: `s${i}` }, 1)
      await slow.advance(100) // one request every 100 ms: nothing to gain by waiting
    }
    assert.ok(rs.batches.every((b) => b.rows === 1))
    assert.ok(
      rs.batches.every((b, i) => b.at === i * 100),
      `ran on arrival: ${rs.batches.map((b) => b.at)}`,
    )

    const fast = new FakeClock()
    const rf = runner(fast, cost)
    const df = new Dispatcher<Payload, string>(
      { maxBatchSize: 8, maxLatencyMs: 200, slots: 1, clock: fast, model: trained(cost, 8) },
      rf.execute,
    )
    const done: Promise<string[]>[] = []
    for (let i = 0; i < 40; i++) {
      done.push(df.submit({ id: `f${i}` }, 1))
      await fast.advance(1) // one request per ms
    }
    await fast.advance(500)
    await Promise.all(done)
    const sizes = rf.batches.map((b) => b.rows)
    assert.ok(
      sizes.slice(2).every((n) => n >= 4),
      `batches filled up under load: ${sizes}`,
    )
  })

  it('rule 1: a client alone in a closed loop is not held for rows that cannot come', async () => {
    // A big per-batch cost: by the arrival rate of the burst, waiting for a second row pays.
    const cost = (n: number) => 2 + 0.05 * n
    const clock = new FakeClock()
    const r = runner(clock, cost)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 2, maxLatencyMs: 200, slots: 1, clock, model: trained(cost, 2) },
      r.execute,
    )
    const arrived = new Map<string, number>()
    const submit = (id: string) => (arrived.set(id, clock.now()), d.submit({ id }, 1))
    // A burst of four at once, then one client that sends its next request when answered.
    const burst = ['b0', 'b1', 'b2', 'b3'].map(submit)
    let n = 0
    const loop = async (): Promise<void> => {
      while (n < 30) await submit(`c${n++}`)
    }
    const lone = Promise.all(burst).then(loop)
    await clock.advance(1000)
    await lone
    const held = r.batches
      .filter((b) => b.slices[0]!.startsWith('c'))
      .filter((b) => b.at > arrived.get(b.slices[0]!.split('[')[0]!)!)
    assert.ok(held.length <= 1, `held ${held.length} of the lone client's 30 requests (one wait may find out)`)
  })

  it(
    'rule 2: sheds what cannot finish within maxLatencyMs, ' + 'at submit and before running, and never runs late',
    async () => {
      const clock = new FakeClock()
      const cost = (n: number) => 20 + 5 * n
      const r = runner(clock, cost)
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 4, maxLatencyMs: 100, slots: 1, clock, model: trained(cost, 4) },
        r.execute,
      )
      const outcomes: ('ok' | 'shed')[] = []
      const finished: number[] = []
      const all: Promise<void>[] = []
      for (let i = 0; i < 60; i++) {
        const submitted = clock.now()
        all.push(
          d.submit({ id: `r${i}` }, 1).then(
            () => {
              outcomes.push('ok')
              finished.push(clock.now() - submitted)
            },
            (err: BundleError) => {
              assert.equal(err.code, 'E_RUNNER_OVERLOADED')
              assert.equal(err.status, 503)
              outcomes.push('shed')
            },
          ),
        )
        await clock.advance(2) // 500 rows/s offered; capacity is 4 rows per 40 ms = 100 rows/s
      }
      await clock.advance(1000)
      await Promise.all(all)
      assert.ok(outcomes.includes('shed'), 'overload was shed')
      assert.ok(outcomes.includes('ok'), 'some requests were served')
      assert.ok(Math.max(...finished) <= 100, `no accepted request exceeded the bound: max ${Math.max(...finished)} ms`)
    },
  )

  it(
    'keeps headroomMs of the bound for the way in and ' + 'out of the runner: nothing accepted finishes in it',
    async () => {
      for (const [headroomMs, limit] of [
        [undefined, 90],
        [30, 70],
      ] as const) {
        const clock = new FakeClock()
        const cost = (n: number) => 20 + 5 * n
        const r = runner(clock, cost)
        const d = new Dispatcher<Payload, string>(
          {
            maxBatchSize: 4,
            maxLatencyMs: 100,
            ...(headroomMs === undefined ? {} : { headroomMs }),
            slots: 1,
            clock,
            model: trained(cost, 4),
          },
          r.execute,
        )
        const finished: number[] = []
        const all: Promise<unknown>[] = []
        for (let i = 0; i < 60; i++) {
          const submitted = clock.now()
          all.push(
            d.submit({ id: `r${i}` }, 1).then(
              () => finished.push(clock.now() - submitted),
              () => undefined,
            ),
          )
          await clock.advance(2)
        }
        await clock.advance(1000)
        await Promise.all(all)
        assert.ok(finished.length > 5)
        assert.ok(
          Math.max(...finished) <= limit,
          `headroom ${headroomMs ?? 'default (10%)'}: max ${Math.max(...finished)} ms, limit ${limit}`,
        )
      }
      assert.throws(
        () => new Dispatcher({ maxBatchSize: 4, maxLatencyMs: 100, headroomMs: 100, slots: 1 }, async () => []),
        /headroomMs/,
      )
    },
  )

  it('tries an unmeasured batch size only when the oldest request can afford it going wrong', async () => {
    // Measured: 1 and 2 rows, throughput rising, so the model wants to try 4 — which on this
    // runner takes 150 ms, not the 60 ms the line through 1 and 2 predicts (as the rec model on
    // 2 cores), so it must only run where a request has room for that.
    const cost = (n: number) => (n <= 2 ? 20 + 10 * n : 150)
    const model = new LatencyModel({ reprobeEvery: 1_000_000 })
    for (let i = 0; i < 5; i++) {
      model.observe(1, cost(1))
      model.observe(2, cost(2))
    }
    const clock = new FakeClock()
    const r = runner(clock, cost)
    const d = new Dispatcher<Payload, string>({ maxBatchSize: 8, maxLatencyMs: 150, slots: 1, clock, model }, r.execute)
    assert.equal(d.stats().targetBatchSize, 4, 'with room to spare, the unmeasured size up is what it aims for')
    // A 2-row batch holds the slot for 40 ms while four requests queue: when it ends, the oldest
    // has 135 - 40 = 95 ms left, less than twice the 60 ms guess for 4 rows.
    const finished: number[] = []
    const all = [d.submit({ id: 'hold' }, 2), ...[0, 1, 2, 3].map((i) => d.submit({ id: `q${i}` }, 1))].map((p) =>
      p.then(
        () => finished.push(clock.now()),
        () => undefined,
      ),
    )
    await clock.advance(1000)
    await Promise.all(all)
    assert.deepEqual(
      r.batches.map((b) => b.rows),
      [2, 2, 2],
      'under pressure it ran the best measured size, not the 150 ms probe',
    )
    assert.equal(finished.length, 5)
    assert.ok(Math.max(...finished) <= 150, `nothing ran late: ${finished}`)
  })

  it('rule 5: finds the throughput-optimal batch size instead of always filling maxBatchSize', async () => {
    // Like onnxruntime's rec model on 2 cores: per-row cost falls until 4 rows, then rises.
    const cost = (n: number) => (n <= 4 ? 8 + 2 * n : 16 + 6 * (n - 4))
    const clock = new FakeClock()
    const r = runner(clock, cost)
    const d = new Dispatcher<Payload, string>(
      { maxBatchSize: 32, maxLatencyMs: 5000, slots: 1, clock, maxQueueSize: 100_000 },
      r.execute,
    )
    const all: Promise<unknown>[] = []
    for (let i = 0; i < 3000; i++) {
      all.push(d.submit({ id: `q${i}` }, 1).catch(() => undefined))
      if (i % 4 === 3) await clock.advance(1) // a backlog: there are always rows to batch
    }
    await clock.advance(60_000)
    await Promise.all(all)
    assert.equal(d.model.bestBatchSize(32, false), 4, 'the best measured size (a re-probe may be due by now)')
    const late = r.batches.slice(-50).map((b) => b.rows)
    const at4 = late.filter((n) => n === 4).length
    assert.ok(at4 >= 40, `settled on 4-row batches: ${late}`)
  })

  it(
    'a pessimistic latency model cannot lock the runner: ' + 'an idle runner runs, and the model corrects itself',
    async () => {
      const clock = new FakeClock()
      const r = runner(clock, () => 2)
      // As after a few cold first runs: every batch looks like 10 × the latency bound.
      const cold = new LatencyModel()
      for (let n = 1; n <= 8; n *= 2) for (let i = 0; i < 3; i++) cold.observe(n, 500)
      const d = new Dispatcher<Payload, string>(
        { maxBatchSize: 8, maxLatencyMs: 50, slots: 1, clock, model: cold },
        r.execute,
      )
      // A closed loop of 8 clients, each sending its next request when the last one is answered.
      const counts = { ok: 0, shed: 0 }
      let stop = false
      const client = async (c: number) => {
        for (let i = 0; !stop; i++) {
          const ok = await d.submit({ id: `c${c}-${i}` }, 1).then(
            () => true,
            () => false,
          )
          counts[ok ? 'ok' : 'shed']++
          if (!ok) await new Promise<void>((res) => clock.setTimeout(res, 1))
        }
      }
      const clients = Array.from({ length: 8 }, (_, c) => client(c))
      await clock.advance(1000)
      stop = true
      await clock.advance(100)
      await Promise.all(clients)
      assert.ok(d.model.estimate(1) < 10, `the model learned the real cost: ${d.model.estimate(1)} ms`)
      // At 2 ms per batch, one second holds hundreds of batches; a locked runner would serve none.
      assert.ok(counts.ok >= 400, `served ${counts.ok}, shed ${counts.shed}`)
    },
  )
})
