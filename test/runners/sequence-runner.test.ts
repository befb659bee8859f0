import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'
import { Registry } from 'prom-client'
import { isBundleError } from '../../errors/index.js'
import {
  onnxRunner,
  type OnnxRunner,
  type OnnxRunnerOptions,
  RunnerMetrics,
  type RunnerTensor,
} from '../../runners/index.js'
import type { RemoteTarget } from '../../runners/remote/target.js'
import { ModelStore } from '../../store/index.js'
import { runnerWorkers } from '../utils/procs.js'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'
import { alone, frame, SAMPLES, VAD, VAD_SEQUENCE as SEQUENCE } from '../utils/vad.js'

// The sequence batcher on a real stateful model: Silero VAD (an LSTM whose state h, c is
// [2, batch, 64]), its frames of many sequences batched together in real worker processes and
// threads, against the same model run by hand one sequence at a time with its state carried over.

const input = (data: Float32Array) => ({ input: { dtype: 'float32' as const, shape: [1, SAMPLES], data } })

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p
  } catch (err) {
    assert.ok(isBundleError(err), `a coded error, got ${String(err)}`)
    return `${err.code}: ${err.message}`
  }
  return 'resolved'
}

describe('sequence runner on Silero VAD (real model, real workers)', () => {
  const home = join(tempDir(), 'home')
  const started: OnnxRunner[] = []
  /** A started runner, stopped when the test ends (so the workers a test sees are its runner's). */
  const start = async (t: TestContext, options: Omit<OnnxRunnerOptions, 'home'>) => {
    const registry = new Registry()
    const r = onnxRunner('silero-vad:1.0.0', { home, ...options })
    r.attachMetrics(new RunnerMetrics(registry, 'test', () => [r]))
    started.push(r)
    t.after(() => r.stop())
    await r.start()
    const metric = async (name: string) =>
      parsePrometheus(await registry.metrics())
        .filter((m) => m.name === name && m.labels.runner === 'silero-vad')
        .reduce((n, m) => n + m.value, 0)
    return { r, metric, registry }
  }

  before(async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'silero-vad', version: '1.0.0', paths: [VAD] })
    await store.save({ name: 'silero-vad', version: '1.0.1', paths: [VAD] })
    store.close()
  })
  after(() => Promise.all(started.map((r) => r.stop()))) // a test that failed early

  for (const isolation of ['process', 'thread'] as const) {
    it(`8 sequences interleaved (${isolation} workers): as each alone, frame by frame, batched`, async (t) => {
      const SEQS = 8
      const FRAMES = 6
      const want = await Promise.all(
        Array.from({ length: SEQS }, (_, s) => alone(Array.from({ length: FRAMES }, (_, f) => frame(s, f)))),
      )
      // The state matters: without it the model answers otherwise (this test could fail).
      const stateless = await alone(
        Array.from({ length: FRAMES }, (_, f) => frame(0, f)),
        false,
      )
      assert.ok(
        stateless.some((v, f) => Math.abs(v - want[0]![f]!) > 1e-4),
        'the carried state changes the answers',
      )
      const { r, metric } = await start(t, {
        isolation,
        workers: 2,
        sequence: SEQUENCE,
        batching: { maxBatchSize: 64, maxDelayMs: 20 },
      })
      // Every frame of every sequence submitted at once, interleaved: frame f of all, then f + 1.
      const calls: Promise<Record<string, RunnerTensor>>[][] = Array.from({ length: SEQS }, () => [])
      for (let f = 0; f < FRAMES; f++)
        for (let s = 0; s < SEQS; s++)
          calls[s]!.push(
            r.run(input(frame(s, f)), { sequence: { id: `seq-${s}`, start: f === 0, end: f === FRAMES - 1 } }),
          )
      for (let s = 0; s < SEQS; s++) {
        const got = await Promise.all(calls[s]!)
        got.forEach((out, f) => {
          assert.deepEqual(Object.keys(out), ['output'], 'the state outputs stay in the worker')
          const v = (out.output!.data as Float32Array)[0]!
          assert.ok(Math.abs(v - want[s]![f]!) < 1e-5, `seq ${s} frame ${f}: ${v} vs ${want[s]![f]}`)
        })
      }
      const batches = r.inferenceStats.batchStats()
      assert.ok(
        batches.some((b) => b.batch_size > 1),
        `frames of different sequences shared batches: ${JSON.stringify(batches.map((b) => b.batch_size))}`,
      )
      assert.ok((await metric('bundle_runner_batch_size_count')) < SEQS * FRAMES, 'fewer batches than frames')
      // Every sequence ended: none is held, and a frame after the end needs a start.
      assert.equal(r.stats()?.sequences?.active, 0)
      assert.equal(await metric('bundle_runner_sequences_active'), 0)
      assert.match(
        await code(r.run(input(frame(0, 9)), { sequence: { id: 'seq-0' } })),
        /^E_SEQUENCE_UNKNOWN: .*"seq-0"/,
      )
      const cfg = r.effectiveConfig() as { sequence: { state: unknown[]; constants: unknown } }
      assert.deepEqual(cfg.sequence.constants, { sr: { dtype: 'int64', shape: [1] } })
      assert.deepEqual(cfg.sequence.state[0], {
        input: 'h',
        output: 'hn',
        batchAxis: 1,
        dtype: 'float32',
        shape: [2, 1, 64],
      })
      JSON.stringify(r.effectiveConfig()) // GET /runners must be able to show it (no BigInt data)
    })
  }

  it('wrong calls get coded errors: no sequence, unknown sequence, two rows, a state input, remote mode', async (t) => {
    const { r } = await start(t, { workers: 1, sequence: SEQUENCE, warmup: false })
    assert.match(await code(r.run(input(frame(0, 0)))), /^E_SEQUENCE_INVALID: .*pass \{ sequence/)
    assert.match(
      await code(r.run(input(frame(0, 0)), { sequence: { id: 'never-started' } })),
      /^E_SEQUENCE_UNKNOWN: .*"never-started".*start/,
    )
    const two = { input: { dtype: 'float32' as const, shape: [2, SAMPLES], data: new Float32Array(2 * SAMPLES) } }
    assert.match(await code(r.run(two, { sequence: { id: 1, start: true } })), /^E_SEQUENCE_INVALID: .*one row/)
    const withState = {
      ...input(frame(0, 0)),
      h: { dtype: 'float32' as const, shape: [2, 1, 64], data: new Float32Array(128) },
    }
    assert.match(await code(r.run(withState, { sequence: { id: 1, start: true } })), /^E_SEQUENCE_INVALID: .*"h"/)
    assert.match(await code(r.run(input(frame(0, 0)), { sequence: { id: '' } })), /^E_SEQUENCE_INVALID: .*sequence.id/)
    assert.throws(
      () => onnxRunner('silero-vad:1.0.0', { home, sequence: SEQUENCE }).useRemote({} as RemoteTarget),
      (e: unknown) => isBundleError(e) && e.code === 'E_SERVE_CONFIG_INVALID' && /BullMQ/.test(e.message),
    )
    // Configuration mistakes stop the start, naming the fix.
    const refused = async (sequence: OnnxRunnerOptions['sequence'], extra: OnnxRunnerOptions, why: RegExp) => {
      const bad = onnxRunner('silero-vad:1.0.0', { home, sequence, ...extra })
      await assert.rejects(
        bad.start(),
        (e: unknown) => isBundleError(e) && e.code === 'E_SERVE_CONFIG_INVALID' && why.test(e.message),
      )
      await bad.stop()
    }
    await refused(
      { state: [{ input: 'nope', output: 'hn' }] },
      {},
      /no input "nope" \(it has "input", "sr", "h", "c"\)/,
    )
    await refused({ state: [{ input: 'h', output: 'hn' }] }, {}, /shape \[1, -1, 64\].*give sequence.state\[0\].shape/)
    await refused(SEQUENCE, { maxWorkers: 2 }, /cannot autoscale/)
    // A plain runner refuses a sequence before anything else.
    const plain = onnxRunner('silero-vad:1.0.0', { home })
    assert.match(
      await code(plain.run(input(frame(0, 0)), { sequence: { id: 1, start: true } })),
      /^E_SEQUENCE_INVALID: .*not a sequence runner/,
    )
    // A start works after all that, and numbers are ids too.
    const out = await r.run(input(frame(0, 0)), { sequence: { id: 1, start: true, end: true } })
    assert.ok(Math.abs((out.output!.data as Float32Array)[0]! - (await alone([frame(0, 0)]))[0]!) < 1e-5)
  })

  it('an idle sequence is evicted (metric), its state freed; its next frame needs start', async (t) => {
    const { r, metric } = await start(t, { workers: 1, sequence: { ...SEQUENCE, idleTimeoutMs: 2_000 }, warmup: false })
    await r.run(input(frame(1, 0)), { sequence: { id: 'idle', start: true } })
    await r.run(input(frame(1, 1)), { sequence: { id: 'busy', start: true } })
    assert.equal(await metric('bundle_runner_sequences_active'), 2)
    // 'busy' keeps sending (every 100 ms, far under the timeout, so a busy machine's lag does
    // not evict it too) until 'idle', which sends nothing, has been evicted.
    for (let f = 2; (await metric('bundle_runner_sequences_evicted_total')) !== 1; f++) {
      assert.ok(f < 600, 'the idle sequence was never evicted')
      await new Promise((res) => setTimeout(res, 100))
      await r.run(input(frame(1, f)), { sequence: { id: 'busy' } })
    }
    assert.equal(await metric('bundle_runner_sequences_active'), 1)
    assert.match(await code(r.run(input(frame(1, 9)), { sequence: { id: 'idle' } })), /^E_SEQUENCE_UNKNOWN: .*evicted/)
    await r.run(input(frame(1, 9)), { sequence: { id: 'busy', end: true } })
    // Started again, it begins from zeros: the answer of a fresh sequence.
    const again = await r.run(input(frame(2, 0)), { sequence: { id: 'idle', start: true, end: true } })
    assert.ok(Math.abs((again.output!.data as Float32Array)[0]! - (await alone([frame(2, 0)]))[0]!) < 1e-5)
  })

  it('a SIGKILLed worker loses its sequences (E_SEQUENCE_LOST); a start works on the restarted one', async (t) => {
    const { r, metric } = await start(t, {
      workers: 1,
      isolation: 'process',
      sequence: SEQUENCE,
      warmup: false,
      batching: { maxBatchSize: 4 },
    })
    await r.run(input(frame(3, 0)), { sequence: { id: 'a', start: true } })
    const [pid] = runnerWorkers('silero-vad')
    assert.ok(pid, 'the worker process is there')
    // Frames queued and in flight when it dies.
    const pending = Array.from({ length: 50 }, (_, f) => code(r.run(input(frame(3, f + 1)), { sequence: { id: 'a' } })))
    process.kill(pid, 'SIGKILL')
    const outcomes = await Promise.all(pending)
    const lost = outcomes.filter((o) => o.startsWith('E_SEQUENCE_LOST'))
    assert.ok(lost.length >= 1, `frames failed with the sequence: ${outcomes.join(' | ')}`)
    for (const o of outcomes) assert.match(o, /^(resolved|E_SEQUENCE_LOST: .*"a".*start the sequence again)$/)
    assert.match(lost[0]!, /worker #0 restarted/)
    assert.match(await code(r.run(input(frame(3, 30)), { sequence: { id: 'a' } })), /^E_SEQUENCE_LOST/)
    assert.equal(await metric('bundle_runner_sequences_lost_total'), 1)
    // (The pool's restart timer does not hold the process open: the test waits in a way that does.)
    await until('the worker to be back', () => r.ready())
    // A start goes to the restarted worker and begins from zeros.
    const fresh = await r.run(input(frame(4, 0)), { sequence: { id: 'a', start: true } })
    assert.ok(Math.abs((fresh.output!.data as Float32Array)[0]! - (await alone([frame(4, 0)]))[0]!) < 1e-5)
    const next = await r.run(input(frame(4, 1)), { sequence: { id: 'a', end: true } })
    const want = await alone([frame(4, 0), frame(4, 1)])
    assert.ok(Math.abs((next.output!.data as Float32Array)[0]! - want[1]!) < 1e-5)
    assert.notEqual(runnerWorkers('silero-vad')[0], pid, 'a new worker process')
  })
  it('a version swap: frames of sequences already queued finish; the old sequences then need a start', async (t) => {
    const { r, metric } = await start(t, { workers: 1, sequence: SEQUENCE, warmup: false })
    await r.run(input(frame(5, 0)), { sequence: { id: 'x', start: true } })
    const queued = r.run(input(frame(5, 1)), { sequence: { id: 'x' } })
    await r.versions.swap('silero-vad:1.0.1')
    const want = await alone([frame(5, 0), frame(5, 1)])
    assert.ok(Math.abs(((await queued).output!.data as Float32Array)[0]! - want[1]!) < 1e-5, 'ran on the old workers')
    assert.match(
      await code(r.run(input(frame(5, 2)), { sequence: { id: 'x' } })),
      /^E_SEQUENCE_LOST: .*"x".*switched to model silero-vad:1.0.1/,
    )
    assert.equal(await metric('bundle_runner_sequences_lost_total'), 1)
    const again = await r.run(input(frame(6, 0)), { sequence: { id: 'x', start: true, end: true } })
    assert.ok(Math.abs((again.output!.data as Float32Array)[0]! - (await alone([frame(6, 0)]))[0]!) < 1e-5)
  })
})
