import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { WireTensor } from '../../runners/pool/protocol.js'
import {
  SEQUENCE_FREE,
  SEQUENCE_RUN,
  type SequenceRunResult,
  type SequenceSpec,
} from '../../runners/sequence/protocol.js'
import { SequenceStates } from '../../runners/sequence/state.js'
import { sequenceMethods } from '../../runners/sequence/worker-methods.js'
import { concatRows, fromWire, sliceRows, toWire } from '../../runners/tensor.js'

// Stacking and splitting along an arbitrary axis, and a worker's per-sequence state, with a
// stand-in model whose answers show which state each row saw.

const f32 = (shape: number[], values: number[]): WireTensor =>
  toWire({ dtype: 'float32', shape, data: Float32Array.from(values) })
const values = (t: WireTensor): number[] => Array.from(fromWire(t).data as Float32Array)
const iota = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i)

/** Row-major index of `at` in `shape`. */
const flat = (shape: number[], at: number[]) => at.reduce((n, a, k) => n * shape[k]! + a, 0)

describe('stacking and splitting along an axis', () => {
  for (const [shape, axis] of [
    [[4, 3], 0],
    [[2, 4, 3], 1],
    [[2, 3, 4], 2],
    [[3, 4, 1, 2], 1],
  ] as [number[], number][]) {
    it(`[${shape}] along axis ${axis}: slices put back together give the tensor again, element for element`, () => {
      const n = shape.reduce((a, b) => a * b, 1)
      const t = f32(shape, iota(n))
      const rows = shape[axis]!
      const parts = iota(rows).map((r) => sliceRows(t, r, 1, axis))
      for (const [r, p] of parts.entries()) {
        assert.deepEqual(
          p.shape,
          shape.map((d, k) => (k === axis ? 1 : d)),
        )
        // Element [i0, …, r, …] of the tensor is element [i0, …, 0, …] of row r's slice.
        const pv = values(p)
        const ps = p.shape
        for (let e = 0; e < pv.length; e++) {
          const at: number[] = []
          let rest = e
          for (let k = ps.length - 1; k >= 0; k--) {
            at.unshift(rest % ps[k]!)
            rest = Math.floor(rest / ps[k]!)
          }
          at[axis] = r
          assert.equal(pv[e], flat(shape, at))
        }
      }
      assert.deepEqual(values(concatRows(parts, axis)), iota(n))
      // Uneven pieces too: rows [0, 1) and [1, rows).
      const split = [sliceRows(t, 0, 1, axis), sliceRows(t, 1, rows - 1, axis)]
      assert.deepEqual(values(concatRows(split, axis)), iota(n))
    })
  }
})

// State [2, batch, 3] along axis 1 (as Silero's h), and one along axis 0: a stand-in model whose
// next state is state + x, and whose output is the sum of the state it was given.
const SPEC: SequenceSpec = {
  state: [
    { input: 'h', output: 'hn', batchAxis: 1, dtype: 'float32', shape: [2, 1, 3] },
    { input: 'k', output: 'kn', batchAxis: 0, dtype: 'float32', shape: [1, 2] },
  ],
  constants: { scale: f32([1], [1]) },
  batchDims: [0, 0],
}

async function standIn(feeds: Record<string, WireTensor>): Promise<Record<string, WireTensor>> {
  const x = values(feeds.x!) // [rows]
  const rows = x.length
  assert.deepEqual(values(feeds.scale!), [1], 'constants are fed')
  assert.deepEqual(feeds.h!.shape, [2, rows, 3])
  assert.deepEqual(feeds.k!.shape, [rows, 2])
  const h = values(feeds.h!)
  const k = values(feeds.k!)
  const hn = h.map((v, i) => v + x[Math.floor(i / 3) % rows]!)
  const kn = k.map((v, i) => v + x[Math.floor(i / 2)]!)
  const output = iota(rows).map((r) => {
    let s = 0
    for (let a = 0; a < 2; a++) for (let c = 0; c < 3; c++) s += h[(a * rows + r) * 3 + c]!
    return s + k[r * 2]! + k[r * 2 + 1]!
  })
  return { output: f32([rows, 1], output), hn: f32([2, rows, 3], hn), kn: f32([rows, 2], kn) }
}

describe("a worker's sequence state", () => {
  const run = (
    m: ReturnType<typeof sequenceMethods>,
    rows: { id: string | number; start?: boolean; end?: boolean }[],
    x: number[],
  ) =>
    m[SEQUENCE_RUN]!({
      inputs: { x: f32([x.length], x) },
      rows: rows.map((r) => ({ id: r.id, start: r.start ?? false, end: r.end ?? false })),
    }) as Promise<SequenceRunResult>

  it('each row gets its own sequence state, stacked along each state axis; outputs leave the state out', async () => {
    const m = sequenceMethods(SPEC, standIn)
    // Two sequences start: state zeros, output 0; their states become 6×x and 2×x summed.
    let r = await run(
      m,
      [
        { id: 'a', start: true },
        { id: 7, start: true },
      ],
      [1, 10],
    )
    assert.deepEqual(Object.keys(r.outputs), ['output'])
    assert.deepEqual(values(r.outputs.output!), [0, 0])
    assert.deepEqual(r.missing, [])
    // Reversed order in the next batch: each still sees its own (1×8 = 8 and 10×8 = 80).
    r = await run(m, [{ id: 7 }, { id: 'a' }], [0, 0])
    assert.deepEqual(values(r.outputs.output!), [80, 8])
    // With a new sequence between them, and 'a' started over.
    r = await run(m, [{ id: 7 }, { id: 'b', start: true }, { id: 'a', start: true }], [1, 5, 2])
    assert.deepEqual(values(r.outputs.output!), [80, 0, 0])
    r = await run(m, [{ id: 'a' }, { id: 7 }, { id: 'b' }], [0, 0, 0])
    assert.deepEqual(values(r.outputs.output!), [16, 88, 40])
  })

  it('an end frees the state; a row without state or start is not run, the others are', async () => {
    const m = sequenceMethods(SPEC, standIn)
    await run(
      m,
      [
        { id: 'a', start: true },
        { id: 'b', start: true },
      ],
      [1, 2],
    )
    const r = await run(m, [{ id: 'a', end: true }, { id: 'ghost' }, { id: 'b' }], [0, 9, 0])
    assert.deepEqual(r.missing, [1])
    assert.deepEqual(values(r.outputs.output!), [8, 16], 'a and b ran, in order, without the ghost row')
    const after = await run(m, [{ id: 'a' }, { id: 'b', end: true }], [0, 0])
    assert.deepEqual(after.missing, [0], "a's state is gone after its end")
    assert.deepEqual(values(after.outputs.output!), [16])
    assert.deepEqual(await run(m, [{ id: 'b' }], [0]), { outputs: {}, missing: [0] })
  })

  it('free drops evicted sequences; two frames of one sequence in a batch are refused', async () => {
    const states = new SequenceStates(SPEC)
    const m = sequenceMethods(SPEC, standIn)
    await run(
      m,
      [
        { id: 'a', start: true },
        { id: 'b', start: true },
      ],
      [1, 2],
    )
    assert.equal(await m[SEQUENCE_FREE]!({ ids: ['a', 'nope'] }), 1)
    assert.deepEqual((await run(m, [{ id: 'a' }, { id: 'b' }], [0, 0])).missing, [0])
    await assert.rejects(run(m, [{ id: 'b' }, { id: 'b' }], [0, 0]), /two frames in one batch/)
    assert.equal(states.size, 0)
  })

  it('a failed run leaves every state as it was', async () => {
    let fail = false
    const m = sequenceMethods(SPEC, async (feeds) => {
      if (fail) throw new Error('boom')
      return standIn(feeds)
    })
    await run(m, [{ id: 'a', start: true }], [1])
    fail = true
    await assert.rejects(run(m, [{ id: 'a' }], [100]), /boom/)
    fail = false
    assert.deepEqual(values((await run(m, [{ id: 'a' }], [0])).outputs.output!), [8])
  })
})
