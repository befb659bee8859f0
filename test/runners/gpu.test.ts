import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { gpuDevices, parseNvidiaSmi } from '../../runners/gpu/devices.js'
import { placeWorkers } from '../../runners/gpu/placement.js'

const refuses = (fn: () => unknown, re: RegExp) =>
  assert.throws(fn, (e: BundleError) => e.code === 'E_RUNNER_GPU_UNAVAILABLE' && e.status === 503 && re.test(e.message))

describe('GPU placement (simulated device lists)', () => {
  it('discovers devices from nvidia-smi -L, overridable with BUNDLE_GPU_DEVICES', () => {
    const smi = 'GPU 0: NVIDIA H200 (UUID: GPU-aaa)\nGPU 1: NVIDIA H200 (UUID: GPU-bbb)\n'
    assert.deepEqual(parseNvidiaSmi(smi), ['0', '1'])
    assert.deepEqual(
      gpuDevices({}, () => smi),
      ['0', '1'],
    )
    assert.deepEqual(
      gpuDevices({ BUNDLE_GPU_DEVICES: '2, 3' }, () => smi),
      ['2', '3'],
    )
    assert.deepEqual(
      gpuDevices({ BUNDLE_GPU_DEVICES: '' }, () => smi),
      [],
    )
    assert.deepEqual(
      gpuDevices({}, () => {
        throw new Error('nvidia-smi: not found')
      }),
      [],
    )
  })

  it('whole devices per worker, fractions packing workers, explicit lists', () => {
    assert.equal(placeWorkers(2, undefined, ['0']), undefined)
    assert.deepEqual(placeWorkers(2, 1, ['0', '1', '2']), [['0'], ['1']])
    assert.deepEqual(placeWorkers(2, 2, ['0', '1', '2', '3']), [
      ['0', '1'],
      ['2', '3'],
    ])
    assert.deepEqual(placeWorkers(4, 0.5, ['0', '1']), [['0'], ['0'], ['1'], ['1']])
    assert.deepEqual(placeWorkers(3, 0.25, ['0']), [['0'], ['0'], ['0']])
    assert.deepEqual(placeWorkers(3, [1, 3], ['0', '1', '2', '3']), [['1'], ['3'], ['1']])
  })

  it('refuses instead of over-subscribing, with a message naming what exists', () => {
    refuses(() => placeWorkers(1, 1, []), /none was found/)
    refuses(() => placeWorkers(3, 1, ['0', '1']), /need 3 devices; this machine has 2/)
    refuses(() => placeWorkers(5, 0.5, ['0', '1']), /need 3 devices/)
    refuses(() => placeWorkers(1, 1.5, ['0', '1']), /whole number/)
    refuses(() => placeWorkers(1, [7], ['0', '1']), /device\(s\) 7 not found; this machine has 0, 1/)
  })
})
