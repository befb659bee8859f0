import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type BundleError, isBundleError } from '../../errors/index.js'
import type { SequenceId } from '../../runners/sequence/protocol.js'
import { type FrameOutcome, type HeldFrame, SequenceTable } from '../../runners/sequence/table.js'

// The per-sequence ordering, placement, eviction and loss of the sequence batcher, without
// workers: frames are plain objects, "sending" one records it, and the test says how it came back.

class TestFrame implements HeldFrame {
  error: BundleError | undefined
  constructor(
    readonly name: string,
    readonly start = false,
    readonly end = false,
  ) {}
  fail(err: BundleError): void {
    this.error ??= err
  }
}

const RAN: FrameOutcome = { kind: 'ran' }
const NOT_RUN: FrameOutcome = { kind: 'not-run' }

function table(o: { workers?: number; idleTimeoutMs?: number } = {}) {
  let now = 0
  const sent: { worker: number; id: SequenceId; frame: TestFrame }[] = []
  const freed: { worker: number; ids: SequenceId[] }[] = []
  const counts = { evicted: 0, lost: 0 }
  const workers = o.workers ?? 1
  const t: SequenceTable<TestFrame> = new SequenceTable<TestFrame>({
    runner: 'vad',
    idleTimeoutMs: o.idleTimeoutMs ?? 1_000,
    now: () => now,
    // The worker with the fewest live sequences, as the batcher picks.
    pick: () => {
      let best = 0
      for (let w = 1; w < workers; w++) if (t.liveOn(w) < t.liveOn(best)) best = w
      return best
    },
    send: (worker, id, frame) => sent.push({ worker, id, frame }),
    free: (worker, ids) => freed.push({ worker, ids }),
    evicted: (n) => (counts.evicted += n),
    lost: (n) => (counts.lost += n),
  })
  const names = () => sent.map((s) => s.frame.name)
  return { t, sent, freed, counts, names, advance: (ms: number) => (now += ms) }
}

const throwsCode = (fn: () => void, code: string, message?: RegExp) =>
  assert.throws(fn, (e: unknown) => isBundleError(e) && e.code === code && (message?.test(e.message) ?? true))

describe('sequence table: ordering, placement, eviction, loss', () => {
  it('one frame per sequence at a time, in arrival order; different sequences go side by side', () => {
    const { t, sent, names } = table()
    const a = [new TestFrame('a0', true), new TestFrame('a1'), new TestFrame('a2', false, true)]
    const b = [new TestFrame('b0', true), new TestFrame('b1')]
    t.accept('a', a[0]!)
    t.accept('b', b[0]!)
    t.accept('a', a[1]!)
    t.accept('a', a[2]!)
    t.accept('b', b[1]!)
    assert.deepEqual(names(), ['a0', 'b0'], 'the first frame of each sequence, not a1 beside a0')
    assert.equal(t.waitingFrames(), 3)
    t.settled('a', a[0]!, RAN)
    assert.deepEqual(names(), ['a0', 'b0', 'a1'])
    // An answer for a frame that is not the one running is ignored (no double send).
    t.settled('a', a[0]!, RAN)
    assert.deepEqual(names(), ['a0', 'b0', 'a1'])
    t.settled('b', b[0]!, NOT_RUN) // refused (e.g. overloaded): the sequence goes on
    assert.deepEqual(names(), ['a0', 'b0', 'a1', 'b1'])
    t.settled('a', a[1]!, RAN)
    assert.deepEqual(names(), ['a0', 'b0', 'a1', 'b1', 'a2'])
    assert.equal(t.size, 2)
    t.settled('a', a[2]!, RAN)
    assert.equal(t.size, 1, 'a ended: its entry is gone')
    assert.deepEqual(
      sent.map((s) => s.id),
      ['a', 'b', 'a', 'b', 'a'],
    )
  })

  it('refuses a non-start frame of an unknown or ended sequence; a start after an end begins again', async () => {
    const { t, names } = table()
    throwsCode(() => t.accept('x', new TestFrame('x1')), 'E_SEQUENCE_UNKNOWN', /"x".*start/)
    const end = new TestFrame('a0', true, true)
    t.accept('a', end)
    throwsCode(() => t.accept('a', new TestFrame('a1')), 'E_SEQUENCE_UNKNOWN', /has ended/)
    // A start queued behind the end frame runs after it, as a new sequence on the same worker.
    const again = new TestFrame('a-again', true)
    const next = new TestFrame('a-next')
    t.accept('a', again)
    t.accept('a', next)
    t.settled('a', end, RAN)
    assert.deepEqual(names(), ['a0', 'a-again'])
    assert.equal(t.size, 1)
    // idle() (what drain waits for) resolves once no frame is held.
    let idle = false
    void t.idle().then(() => (idle = true))
    t.settled('a', again, RAN)
    assert.deepEqual(names(), ['a0', 'a-again', 'a-next'])
    await Promise.resolve()
    assert.equal(idle, false, 'a-next still runs')
    t.settled('a', next, RAN)
    await Promise.resolve()
    assert.equal(idle, true)
  })

  it('places a new sequence on the worker holding the fewest', () => {
    const { t, sent } = table({ workers: 3 })
    for (const id of ['a', 'b', 'c', 'd', 'e']) t.accept(id, new TestFrame(id, true))
    assert.deepEqual(
      sent.map((s) => s.worker),
      [0, 1, 2, 0, 1],
    )
    assert.deepEqual([t.liveOn(0), t.liveOn(1), t.liveOn(2)], [2, 2, 1])
  })

  it('evicts sequences idle for idleTimeoutMs (never a busy one), tells their workers, forgets them', () => {
    const { t, freed, counts, advance } = table({ workers: 2, idleTimeoutMs: 1_000 })
    const a = new TestFrame('a', true)
    const b = new TestFrame('b', true)
    const c = new TestFrame('c', true)
    t.accept('a', a)
    t.accept('b', b)
    t.accept('c', c)
    t.settled('a', a, RAN)
    t.settled('b', b, RAN)
    advance(999)
    t.sweep()
    assert.equal(counts.evicted, 0, 'not idle long enough')
    advance(1)
    t.sweep()
    assert.equal(counts.evicted, 2, 'a and b; c still has a frame running')
    assert.deepEqual(freed, [
      { worker: 0, ids: ['a'] },
      { worker: 1, ids: ['b'] },
    ])
    assert.deepEqual(t.ids(), ['c'])
    throwsCode(() => t.accept('a', new TestFrame('a1')), 'E_SEQUENCE_UNKNOWN', /evicted after 1000 ms idle/)
    // Idle time counts from the last frame's answer, not its start.
    advance(5_000)
    t.settled('c', c, RAN)
    advance(999)
    t.sweep()
    assert.deepEqual(t.ids(), ['c'])
  })

  it("a worker's death loses its sequences: their frames fail, later ones too, until a start or the timeout", () => {
    const { t, counts, names, advance } = table({ workers: 2, idleTimeoutMs: 1_000 })
    const a0 = new TestFrame('a0', true)
    const a1 = new TestFrame('a1')
    const b0 = new TestFrame('b0', true)
    t.accept('a', a0)
    t.accept('b', b0)
    t.accept('a', a1)
    t.loseWorker(0, 'worker #0 restarted: killed by SIGKILL')
    for (const f of [a0, a1]) {
      assert.equal(f.error?.code, 'E_SEQUENCE_LOST')
      assert.match(f.error!.message, /"a" is gone \(worker #0 restarted: killed by SIGKILL\); start the sequence again/)
    }
    assert.equal(b0.error, undefined, 'the other worker keeps its sequences')
    assert.equal(counts.lost, 1)
    throwsCode(() => t.accept('a', new TestFrame('a2')), 'E_SEQUENCE_LOST', /killed by SIGKILL/)
    // The late answer of the lost frame changes nothing.
    t.settled('a', a0, RAN)
    // A start begins it again, on the worker with fewer sequences.
    t.accept('a', new TestFrame('a-new', true))
    assert.deepEqual(names(), ['a0', 'b0', 'a-new'])
    // A loss is remembered for one idle timeout, then the id is simply unknown.
    t.loseWorker(0, 'restarted again')
    advance(1_000)
    t.sweep()
    throwsCode(() => t.accept('a', new TestFrame('a3')), 'E_SEQUENCE_UNKNOWN')
  })

  it('a frame that comes back "gone" loses its sequence and fails the frames behind it', async () => {
    const { t } = table()
    const a0 = new TestFrame('a0', true)
    const a1 = new TestFrame('a1')
    t.accept('a', a0)
    t.accept('a', a1)
    const idle = t.idle()
    t.settled('a', a0, { kind: 'gone', reason: 'worker #0 restarted: E_RUNNER_TIMEOUT' })
    assert.equal(a0.error?.code, 'E_SEQUENCE_LOST')
    assert.equal(a1.error?.code, 'E_SEQUENCE_LOST')
    await idle // nothing is held any more
    assert.equal(t.size, 0)
  })

  it('markLost: sequences of a replaced model version say why on their next frame', () => {
    const { t, counts } = table()
    t.markLost(['old'], 'the runner switched to model vad:2')
    assert.equal(counts.lost, 1)
    throwsCode(() => t.accept('old', new TestFrame('o1')), 'E_SEQUENCE_LOST', /switched to model vad:2/)
    t.accept('old', new TestFrame('o-start', true))
    assert.equal(t.size, 1)
  })
})
