import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ensemble, RunnerStats, type InferenceModel, type RunnerTensor } from '../../runners/index.js'

// The ensemble's wiring and scheduling as pure logic, with stand-in models whose calls the test
// finishes by hand. test/framework/v2-ensemble.test.ts runs ensembles of real models.

const f32 = (...v: number[]): RunnerTensor => ({ dtype: 'float32', shape: [1, v.length], data: new Float32Array(v) })

interface Call {
  model: string
  inputs: Record<string, RunnerTensor>
  finish: (out: Record<string, RunnerTensor>) => void
  fail: (err: Error) => void
}

/** Models with the given inputs and outputs whose infer() waits until the test finishes the call. */
function models(specs: Record<string, { in: string[]; out: string[] }>) {
  const calls: Call[] = []
  const byName = new Map<string, InferenceModel>()
  for (const [name, s] of Object.entries(specs)) {
    byName.set(name, {
      name,
      version: '1.0.0',
      platform: 'onnxruntime_onnx',
      ready: () => true,
      inputs: () => s.in.map((n) => ({ name: n, dtype: 'float32', shape: [-1, 2] })),
      outputs: () => s.out.map((n) => ({ name: n, dtype: 'float32', shape: [-1, 2] })),
      maxBatchSize: () => (name === 'b' ? 4 : 16),
      config: () => ({}),
      stats: new RunnerStats(),
      infer: (inputs) => new Promise((finish, fail) => calls.push({ model: name, inputs, finish, fail })),
    })
  }
  const resolve = (name: string) => {
    const m = byName.get(name)
    if (m === undefined) throw new Error(`unknown model "${name}"`)
    return m
  }
  return { calls, resolve }
}

const tick = () => new Promise((r) => setImmediate(r))

describe('ensemble: wiring and scheduling', () => {
  it('runs independent steps at once and a step as soon as its own inputs exist', async () => {
    const { calls, resolve } = models({
      a: { in: ['x'], out: ['y'] },
      b: { in: ['x'], out: ['y'] },
      c: { in: ['p', 'q'], out: ['z'] },
    })
    const e = ensemble('diamond', {
      steps: [
        { model: 'c', inputMap: { p: 'fromA', q: 'fromB' }, outputMap: { z: 'out' } },
        { model: 'a', inputMap: { x: 'image' }, outputMap: { y: 'fromA' } },
        { model: { name: 'b' }, inputMap: { x: 'image' }, outputMap: { y: 'fromB' } },
      ],
    })
    e.bind(resolve)
    await e.start()
    const m = e.inference()!
    assert.equal(m.platform, 'ensemble')
    assert.deepEqual(
      m.inputs().map((t) => t.name),
      ['image'],
    )
    assert.deepEqual(
      m.outputs().map((t) => t.name),
      ['out'],
    )
    assert.equal(m.maxBatchSize(), 4, 'the smallest max batch of its steps')
    const result = m.infer({ image: f32(1, 2) })
    await tick()
    // a and b both started before either finished; c waits for both.
    assert.deepEqual(calls.map((c) => c.model).sort(), ['a', 'b'])
    calls.find((c) => c.model === 'b')!.finish({ y: f32(20) })
    await tick()
    assert.equal(calls.length, 2, 'c must not start before a has finished')
    calls.find((c) => c.model === 'a')!.finish({ y: f32(10) })
    await tick()
    assert.equal(calls.length, 3)
    const c = calls[2]!
    assert.equal(c.model, 'c')
    assert.deepEqual([...(c.inputs.p!.data as Float32Array)], [10])
    assert.deepEqual([...(c.inputs.q!.data as Float32Array)], [20])
    c.finish({ z: f32(30) })
    const out = await result
    assert.deepEqual(Object.keys(out), ['out'])
    assert.deepEqual([...(out.out!.data as Float32Array)], [30])
    const steps = m.stepStats!()
    assert.deepEqual(
      steps.map((s) => [s.model_name, s.model_version, s.success.count, s.fail.count]),
      [
        ['c', '1.0.0', 1, 0],
        ['a', '1.0.0', 1, 0],
        ['b', '1.0.0', 1, 0],
      ],
    )
    assert.equal(m.stats.inferenceCount, 1)
    assert.equal(m.stats.success.count, 1)
  })

  it('a failing step fails the call, counts as a failure, and later steps never run', async () => {
    const { calls, resolve } = models({ a: { in: ['x'], out: ['y'] }, b: { in: ['x'], out: ['y'] } })
    const e = ensemble('chain', {
      steps: [
        { model: 'a', inputMap: { x: 'in' }, outputMap: { y: 'mid' } },
        { model: 'b', inputMap: { x: 'mid' }, outputMap: { y: 'out' } },
      ],
    })
    e.bind(resolve)
    await e.start()
    const m = e.inference()!
    const result = m.infer({ in: f32(1) })
    await tick()
    calls[0]!.fail(new Error('worker died'))
    await assert.rejects(result, /worker died/)
    assert.equal(calls.length, 1)
    assert.equal(m.stepStats!()[0]!.fail.count, 1)
    assert.equal(m.stats.fail.count, 1)
    await assert.rejects(
      m.infer({ wrong: f32(1) }),
      (err: any) => err.code === 'E_INPUT_INVALID' && /missing input "in"/.test(err.message),
    )
  })

  it('refuses wiring that cannot run, naming the step', async () => {
    const code = (fn: () => unknown, msg: RegExp) =>
      assert.throws(fn, (err: any) => err.code === 'E_ENSEMBLE_INVALID' && msg.test(err.message))
    code(() => ensemble('Bad Name', { steps: [{ model: 'a', inputMap: { x: 'i' }, outputMap: { y: 'o' } }] }), /name/)
    code(() => ensemble('e', { steps: [] }), /at least one step/)
    code(
      () => ensemble('e', { steps: [{ model: 'a', inputMap: {}, outputMap: { y: 'o' } }] }),
      /step 1 \(a\): inputMap/,
    )
    code(
      () =>
        ensemble('e', {
          steps: [
            { model: 'a', inputMap: { x: 'i' }, outputMap: { y: 'o' } },
            { model: 'b', inputMap: { x: 'i' }, outputMap: { y: 'o' } },
          ],
        }),
      /"o" is produced by step 1 and step 2/,
    )
    code(
      () =>
        ensemble('e', {
          steps: [
            { model: 'a', inputMap: { x: 'p' }, outputMap: { y: 'q' } },
            { model: 'b', inputMap: { x: 'q' }, outputMap: { y: 'p' } },
          ],
        }),
      /nothing can start/,
    )
    code(
      () =>
        ensemble('e', {
          steps: [
            { model: 'a', inputMap: { x: 'in', z: 'r' }, outputMap: { y: 'q' } },
            { model: 'b', inputMap: { x: 'q' }, outputMap: { y: 'r' } },
          ],
        }),
      /steps 1 \(a\), 2 \(b\) feed each other in a cycle/,
    )
    code(
      () => ensemble('e', { steps: [{ model: 'a', inputMap: { x: 'i' }, outputMap: { y: 'o' } }], outputs: ['nope'] }),
      /output "nope" is produced by no step/,
    )
    // Against the models, at start.
    const { resolve } = models({ a: { in: ['x', 'w'], out: ['y'] } })
    const start = async (steps: Parameters<typeof ensemble>[1]['steps'], msg: RegExp) => {
      const e = ensemble('e', { steps })
      e.bind(resolve)
      await assert.rejects(e.start(), (err: any) => err.code === 'E_ENSEMBLE_INVALID' && msg.test(err.message))
    }
    await start([{ model: 'zz', inputMap: { x: 'i' }, outputMap: { y: 'o' } }], /step 1: unknown model "zz"/)
    await start(
      [{ model: 'a', inputMap: { x: 'i', v: 'j' }, outputMap: { y: 'o' } }],
      /a has no input "v" \(inputs: "x", "w"\)/,
    )
    await start([{ model: 'a', inputMap: { x: 'i' }, outputMap: { y: 'o' } }], /does not feed a's input "w"/)
    await start(
      [{ model: 'a', inputMap: { x: 'i', w: 'i' }, outputMap: { out: 'o' } }],
      /a has no output "out" \(outputs: "y"\)/,
    )
    // A producer's dtype must be what its consumer takes.
    const typed = models({ f: { in: ['x'], out: ['y'] }, g: { in: ['x'], out: ['y'] } })
    const int64 = typed.resolve('g')
    const origInputs = int64.inputs
    ;(int64 as { inputs: typeof origInputs }).inputs = () => origInputs().map((t) => ({ ...t, dtype: 'int64' }))
    const e = ensemble('e', {
      steps: [
        { model: 'f', inputMap: { x: 'i' }, outputMap: { y: 'm' } },
        { model: 'g', inputMap: { x: 'm' }, outputMap: { y: 'o' } },
      ],
    })
    e.bind(typed.resolve)
    await assert.rejects(
      e.start(),
      (err: any) =>
        err.code === 'E_ENSEMBLE_INVALID' &&
        /step 2: g's input "x" takes int64, but tensor "m" is float32/.test(err.message),
    )
  })
})
