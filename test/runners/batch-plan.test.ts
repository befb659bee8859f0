import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { decideBatching } from '../../runners/onnx/batch-plan.js'
import { warmupPlan } from '../../runners/onnx/warmup.js'

// How a runner's requests reach its model, decided from the model's signature (the pure rules;
// test/framework/v2-conformance.test.ts and v2-triton.test.ts serve real models by them).

const t = (name: string, shape: number[], dtype = 'float32') => ({ name, dtype, shape })
const sig = (inputs: ReturnType<typeof t>[], outputs: ReturnType<typeof t>[]) => ({ inputs, outputs })
const refused = (fn: () => unknown, pattern: RegExp) =>
  assert.throws(
    fn,
    (e: { code?: string; message: string }) => e.code === 'E_SERVE_CONFIG_INVALID' && pattern.test(e.message),
  )

describe('the batch plan from the model', () => {
  it('batches only when the first dimension of every input and output is variable', () => {
    const batchable = sig([t('x', [-1, 3]), t('k', [-1, 2], 'int64')], [t('y', [-1, 3])])
    assert.deepEqual(decideBatching('m', batchable, {}), {
      batched: true,
      dims: [0, 0],
      maxBatchSize: 32,
      reason: 'the first dimension of every input and output is variable',
    })
    assert.equal(decideBatching('m', batchable, { batching: { maxBatchSize: 4 } }).maxBatchSize, 4)
    const cases: [ReturnType<typeof sig>, RegExp][] = [
      [sig([t('x', [3, 4, 5])], [t('y', [3, 4, 5])]), /input "x" has shape \[3,4,5\], whose dimension 0 is fixed at 3/],
      [sig([t('x', [1, 16])], [t('y', [1, 4])]), /fixed at 1/],
      [sig([t('k', [])], [t('y', [-1])]), /input "k" is a scalar/],
      [sig([t('x', [-1, 3])], [t('y', [4])]), /output "y" has shape \[4\]/],
      [sig([t('x', [-1, 3])], [t('y', [])]), /output "y" is a scalar/],
      [sig([], [t('y', [-1])]), /takes no inputs/],
      [sig([t('x', [-1])], [t('s', [-1], 'non-tensor')]), /output "s" is not a tensor/],
    ]
    for (const [s, why] of cases) {
      const plan = decideBatching('m', s, {})
      assert.equal(plan.batched, false)
      assert.equal(plan.maxBatchSize, 0)
      assert.match(plan.reason, why)
    }
  })

  it('maxBatchSize 0 runs any model unbatched; settings the model contradicts are refused, naming the tensor', () => {
    const batchable = sig([t('x', [-1, 3])], [t('y', [-1, 3])])
    assert.deepEqual(decideBatching('m', batchable, { batching: { maxBatchSize: 0 } }), {
      batched: false,
      dims: [0, 0],
      maxBatchSize: 0,
      reason: 'batching.maxBatchSize is 0',
    })
    const fixed = sig([t('x', [1, 16])], [t('y', [1, 16])])
    refused(
      () => decideBatching('torch', fixed, { batching: { maxBatchSize: 8 } }),
      /runner torch: batching.maxBatchSize 8 .* input "x" has shape \[1,16\].* Drop maxBatchSize/,
    )
    refused(() => decideBatching('m', fixed, { batching: { batchDim: 0 } }), /batchDim 0 contradicts the model/)
    refused(() => decideBatching('m', batchable, { batching: { maxBatchSize: 0, batchDim: 1 } }), /drop one/)
    // A [3, n] model batched along dimension 1, as its operator says.
    const cols = sig([t('x', [3, -1])], [t('y', [3, -1])])
    assert.deepEqual(decideBatching('m', cols, { batching: { batchDim: 1 } }).dims, [1, 1])
    refused(() => decideBatching('m', cols, { batching: { batchDim: [1, 0] } }), /output "y" .* fixed at 3/)
  })
})

describe('the warm-up plan', () => {
  const unbatched = { batched: false, dims: [0, 0] as [number, number], maxBatchSize: 0, reason: '' }
  const batched = { batched: true, dims: [0, 0] as [number, number], maxBatchSize: 8, reason: '' }
  const batching = { enabled: true, maxBatchSize: 8 }

  it('warms a model that runs requests as given with its own shapes, once per round; never a guessed batch', () => {
    const plan = warmupPlan('m', {}, [t('x', [3, 4, 5]), t('k', [], 'int64')], unbatched, batching)
    assert.equal(plan.required, false)
    assert.deepEqual(plan.view, { rounds: 1, shapes: { x: [3, 4, 5], k: [] } })
    assert.equal(plan.calls.length, 1)
    const inputs = plan.calls[0]!.inputs()
    assert.deepEqual(inputs.x!.shape, [3, 4, 5])
    assert.deepEqual(inputs.k!.shape, [])
    assert.equal(inputs.k!.data.byteLength, 8)
  })

  it('warms a batched model over its batch sizes; without fixed shapes: default off, explicit refused', () => {
    const plan = warmupPlan('m', { warmup: { rounds: 2 } }, [t('x', [-1, 3])], batched, batching)
    assert.equal(plan.required, true)
    assert.deepEqual(plan.view, { rounds: 2, sizes: [1, 2, 4, 8], shapes: { x: [3] } })
    assert.deepEqual(
      plan.calls.map((c) => c.inputs().x!.shape),
      [
        [1, 3],
        [2, 3],
        [4, 3],
        [8, 3],
      ],
    )
    // onnxruntime's first two runs at a new shape are not its steady time (the second is the
    // slowest): each size is timed after two untimed runs, the timed ones as many as rounds.
    assert.deepEqual(
      plan.calls.map((c) => [c.untimed, c.timed]),
      [
        [2, 2],
        [2, 2],
        [2, 2],
        [2, 2],
      ],
    )
    const off = warmupPlan('m', {}, [t('x', [2, -1])], unbatched, batching)
    assert.deepEqual(off.calls, [])
    assert.match(String(off.view), /^off: input "x" has shape \[2,-1\], not fixed by the model; set warmup.shapes/)
    refused(
      () => warmupPlan('m', { warmup: { rounds: 1 } }, [t('x', [2, -1])], unbatched, batching),
      /cannot warm up input "x".*the sizes of the whole input/,
    )
    const given = warmupPlan('m', { warmup: { shapes: { x: [2, 7] } } }, [t('x', [2, -1])], unbatched, batching)
    assert.deepEqual(given.calls[0]!.inputs().x!.shape, [2, 7])
  })

  it('runs Triton-style samples as given: zeros, random values, batch sizes, counts', () => {
    const plan = warmupPlan(
      'm',
      {
        warmup: {
          samples: [
            { name: 'zeros', batchSize: 4, inputs: { x: { dims: [3], zeroData: true } } },
            { count: 3, inputs: { x: { dims: [3], randomData: true } } },
          ],
        },
      },
      [t('x', [-1, 3])],
      batched,
      batching,
    )
    assert.equal(plan.required, true)
    assert.deepEqual(plan.view, { samples: ['zeros', 'sample 1'] })
    assert.deepEqual(
      plan.calls.map((c) => [c.rows, c.timed, c.inputs().x!.shape]),
      [
        [4, 1, [4, 3]],
        [1, 3, [1, 3]],
      ],
    )
    const random = new Float32Array(plan.calls[1]!.inputs().x!.data.buffer)
    assert.ok(random.some((v) => v !== 0) && random.every((v) => v >= 0 && v < 1))
    refused(
      () =>
        warmupPlan(
          'm',
          { warmup: { samples: [{ inputs: { y: { dims: [3] } } }] } },
          [t('x', [-1, 3])],
          batched,
          batching,
        ),
      /warmup.samples\[0\] feeds "y", which the model does not take \("x"\)/,
    )
  })
})
