import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import pino from 'pino'
import { onnxRunner, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { tempDir } from '../utils/tmp.js'
import { runnersService, writeTwoModel } from '../utils/v2-models.js'

// Interop beyond our own gRPC stack: a client on gRPC's C core (Debian's python3-grpcio, the
// library under Triton's Python client), its stubs compiled by protoc from docs/inference.proto.
// CI installs it and sets BUNDLE_REQUIRE_GRPC_PYTHON=1: there the test runs, never skips.

const PYTHON = '/usr/bin/python3'
const root = join(import.meta.dirname, '..', '..')
const available = spawnSync(PYTHON, ['-c', 'import grpc, grpc_tools']).status === 0
const required = process.env.BUNDLE_REQUIRE_GRPC_PYTHON === '1'
const skip = !available && !required ? 'python3-grpcio and python3-grpc-tools are not installed' : false
const KEY = 'py-key'

describe('a gRPC C-core client (python3-grpcio) against the server', { skip }, () => {
  let running: RunningServer
  const home = join(tempDir(), 'home')

  before(async () => {
    assert.ok(available, 'BUNDLE_REQUIRE_GRPC_PYTHON=1: install python3-grpcio python3-grpc-tools')
    const store = ModelStore.open({ home })
    const model = writeTwoModel(join(tempDir(), 'two.onnx'))
    await store.save({ name: 'two', version: '1.0.0', paths: [model] })
    store.close()
    running = await serve(
      runnersService('grpc-python', [
        onnxRunner('two:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8, maxDelayMs: 3 } }),
      ]),
      { port: 0, grpcPort: 0, apiKey: KEY, logger: pino({ level: 'silent' }), handleSignals: false, storeHome: home },
    )
  })
  after(() => running?.close())

  it('metadata, config, ModelInfer with raw bytes, the key, and a 20-request stream', async () => {
    const target = running.grpcUrl!.replace('grpc://', '')
    const { stdout } = await promisify(execFile)(
      PYTHON,
      [join(root, 'test', 'fixtures', 'grpc_client.py'), join(root, 'docs'), tempDir(), target, KEY],
      { timeout: 120_000 },
    )
    const seen = JSON.parse(stdout)
    assert.equal(seen.server.name, 'modelbundle')
    assert.ok(seen.server.extensions.includes('streaming'))
    assert.deepEqual(seen.inputs, [
      ['x', 'FP32', [-1, 3]],
      ['k', 'INT64', [-1, 2]],
    ])
    assert.deepEqual(seen.config, { max_batch_size: 8, data_type: 'TYPE_FP32', window_us: 3000 })
    assert.deepEqual(seen.infer, {
      id: 'py7',
      values: [
        [-7, -7.5, 7],
        [7, 2 ** 40],
      ],
      outputs: ['y', 'k_out'],
    })
    assert.equal(seen.no_key, 'UNAUTHENTICATED')
    assert.equal(Object.keys(seen.stream).length, 20)
    for (let i = 0; i < 20; i++)
      assert.deepEqual(seen.stream[`py${i}`], [
        [-i, -i - 0.5, i || -0],
        [i, 2 ** 40],
      ])
  })
})
