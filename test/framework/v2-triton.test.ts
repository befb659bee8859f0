import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import pino from 'pino'
import { defineService, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { grpcError, inferenceClient } from '../utils/grpc.js'
import { encodeModel, node, type Value } from '../utils/onnx-graph.js'
import { tempDir } from '../utils/tmp.js'

// What a user coming from Triton does with a store of models nobody wrote for this server: a
// torch.onnx.export model with a fixed batch of 1, a model whose zeros are not valid input, model
// names as Triton users write them — loaded, configured and unloaded through the repository API
// with Triton's own config fields, answered with Triton's texts and statuses.

const f32 = (name: string, dims: (number | string)[]): Value => ({ name, dtype: 'float32', dims })
const root = join(import.meta.dirname, '..', '..')
const PYTHON = '/usr/bin/python3'
const pythonGrpc = spawnSync(PYTHON, ['-c', 'import grpc, grpc_tools']).status === 0

describe('serving a store as Triton users expect', () => {
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  let server: RunningServer
  let grpc: ReturnType<typeof inferenceClient>
  const logs: Record<string, unknown>[] = []

  const save = async (store: ModelStore, name: string, spec: Parameters<typeof encodeModel>[0]) => {
    const file = join(dir, `${name}.onnx`)
    writeFileSync(file, encodeModel(spec))
    await store.save({ name, version: '1', paths: [file] })
  }

  before(async () => {
    const store = ModelStore.open({ home })
    // torch.onnx.export without dynamic axes: batch fixed at 1 on input and output.
    await save(store, 'torch_fixed', {
      nodes: [node('Neg', ['x'], ['y'])],
      inputs: [f32('x', [1, 16])],
      outputs: [f32('y', [1, 16])],
    })
    // Range: zeros make delta 0, which onnxruntime refuses — a default warm-up cannot be run.
    await save(store, 'range_model', {
      nodes: [node('Range', ['start', 'limit', 'delta'], ['y'])],
      inputs: ['start', 'limit', 'delta'].map((n) => f32(n, [])),
      outputs: [f32('y', ['n'])],
    })
    // Names as Triton users write them: underscores, upper case, and two that differ only in case.
    for (const name of ['simple_int8', 'Test_ELU', 'test_elu', 'torch_batch'])
      await save(store, name, {
        nodes: [node('Identity', ['x'], ['y'])],
        inputs: [f32('x', ['batch', 3])],
        outputs: [f32('y', ['batch', 3])],
      })
    store.close()
    server = await serve(defineService({ name: 'triton-like', apis: {}, modelsOnly: true }), {
      port: 0,
      grpcPort: 0,
      storeHome: home,
      accessLog: false,
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    })
    grpc = inferenceClient(server.grpcUrl!)
  })
  after(async () => {
    grpc?.close()
    await server?.close()
  })

  const post = async (path: string, body?: unknown) => {
    const r = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    })
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const get = async (path: string) => {
    const r = await fetch(`${server.url}${path}`)
    return { status: r.status, json: (await r.json().catch(() => undefined)) as any }
  }
  const neg = (rows: number) => ({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 16], data: Array.from({ length: rows * 16 }, (_, i) => i) }],
  })

  it('a model exported with a fixed batch of 1 loads and serves requests one at a time, exactly as given', async () => {
    const load = await post('/v2/repository/models/torch_fixed/load')
    assert.equal(load.status, 200, JSON.stringify(load.json))
    const config = await get('/v2/models/torch_fixed/config')
    assert.equal(config.json.max_batch_size, 0)
    assert.deepEqual(config.json.input[0].dims, [1, 16], 'dims are the whole shape when nothing batches')
    assert.equal(config.json.dynamic_batching, undefined)
    const answers = await Promise.all(Array.from({ length: 6 }, () => post('/v2/models/torch_fixed/infer', neg(1))))
    for (const a of answers) {
      assert.equal(a.status, 200)
      assert.deepEqual(a.json.outputs[0].shape, [1, 16])
      assert.deepEqual(
        a.json.outputs[0].data,
        Array.from({ length: 16 }, (_, i) => (i === 0 ? -0 : -i)),
      )
    }
    const two = await post('/v2/models/torch_fixed/infer', neg(2))
    assert.equal(two.status, 400)
    assert.match(two.json.error, /expected shape \[1,16\]/)
  })

  it('Triton config fields contradicting the model fail the load with its reason; the model stays known', async () => {
    await post('/v2/repository/models/torch_fixed/unload')
    const bad = await post('/v2/repository/models/torch_fixed/load', {
      parameters: { config: JSON.stringify({ max_batch_size: 8, dynamic_batching: {} }) },
    })
    assert.equal(bad.status, 400)
    assert.match(bad.json.error, /^failed to load 'torch_fixed': .*maxBatchSize 8 .*input "x" has shape \[1,16\]/)
    const row = (await post('/v2/repository/index')).json.find((m: { name: string }) => m.name === 'torch_fixed')
    assert.equal(row.state, 'UNAVAILABLE')
    assert.match(row.reason, /failed to load/)
    const metadata = await get('/v2/models/torch_fixed')
    assert.equal(metadata.status, 404)
    assert.match(metadata.json.error, /^Request for unknown model: 'torch_fixed' has no available versions/)
    assert.equal((await get('/v2/models/torch_fixed/ready')).status, 400, 'known, not ready')
    // A malformed config is a failed load too, in Triton's words.
    const malformed = await post('/v2/repository/models/torch_fixed/load', { parameters: { config: '{"max_' } })
    assert.equal(malformed.status, 400)
    assert.match(malformed.json.error, /^failed to load 'torch_fixed': .*not valid JSON/)
    // A plain load afterwards works: the failed settings were not kept.
    assert.equal((await post('/v2/repository/models/torch_fixed/load')).status, 200)
    assert.equal((await post('/v2/models/torch_fixed/infer', neg(1))).status, 200)
  })

  it("Triton's max_batch_size, dynamic_batching and instance_group configure a model that batches", async () => {
    const load = await post('/v2/repository/models/simple_int8/load', {
      parameters: {
        config: JSON.stringify({
          name: 'simple_int8',
          max_batch_size: 4,
          dynamic_batching: { max_queue_delay_microseconds: 2500 },
          instance_group: [{ count: 2, kind: 'KIND_CPU' }],
        }),
      },
    })
    assert.equal(load.status, 200, JSON.stringify(load.json))
    const config = (await get('/v2/models/simple_int8/config')).json
    assert.equal(config.max_batch_size, 4)
    assert.equal(config.dynamic_batching.max_queue_delay_microseconds, 2500)
    assert.deepEqual(config.instance_group, [{ count: 2, kind: 'KIND_CPU' }])
    assert.deepEqual(config.input[0].dims, [3])
    const meta = (await get('/v2/models/simple_int8')).json
    assert.deepEqual(meta.inputs[0].shape, [-1, 3])
    const five = await post('/v2/models/simple_int8/infer', {
      inputs: [{ name: 'x', datatype: 'FP32', shape: [5, 3], data: new Array(15).fill(1) }],
    })
    assert.equal(five.status, 400)
    assert.match(five.json.error, /max_batch_size 4/)
  })

  it('a default warm-up the model cannot run is logged and the model loads; one asked for fails the load', async () => {
    const load = await post('/v2/repository/models/range_model/load')
    assert.equal(load.status, 200, JSON.stringify(load.json))
    assert.ok(
      logs.some((l) => l.level === 40 && /default warm-up failed .*delta in Range operator/.test(String(l.msg))),
      'the failed default warm-up is in the log',
    )
    const out = await post('/v2/models/range_model/infer', {
      inputs: ['start', 'limit', 'delta'].map((name, i) => ({
        name,
        datatype: 'FP32',
        shape: [],
        data: [[1, 9, 2][i]],
      })),
    })
    assert.equal(out.status, 200)
    assert.deepEqual(out.json.outputs[0], { name: 'y', datatype: 'FP32', shape: [4], data: [1, 3, 5, 7] })
    const runners = (await get('/runners')).json as { name: string; config: Record<string, unknown> }[]
    const entry = runners.find((r) => r.name === 'range_model')
    assert.match(String(entry?.config.warmupFailed), /delta/, '/runners shows why the warm-up failed')
    // An explicit warm-up (Triton's model_warmup) is the operator's: its failure fails the load.
    await post('/v2/repository/models/range_model/unload')
    const asked = await post('/v2/repository/models/range_model/load', {
      parameters: {
        config: JSON.stringify({
          model_warmup: [
            {
              name: 'zeros',
              batch_size: 1,
              inputs: Object.fromEntries(
                ['start', 'limit', 'delta'].map((n) => [n, { data_type: 'TYPE_FP32', dims: [], zero_data: true }]),
              ),
            },
          ],
        }),
      },
    })
    assert.equal(asked.status, 400)
    assert.match(asked.json.error, /^failed to load 'range_model': .*warm-up.*delta in Range operator can not be zero/)
  })

  it('model names as Triton users write them; names differing only in case are two models', async () => {
    for (const name of ['Test_ELU', 'test_elu']) {
      const r = await post(`/v2/repository/models/${name}/load`)
      assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.json)}`)
    }
    assert.equal((await get('/v2/models/Test_ELU/ready')).status, 200)
    assert.equal((await get('/v2/models/test_elu/ready')).status, 200)
    assert.equal((await get('/v2/models/TEST_ELU/ready')).status, 404)
  })

  it("errors in Triton's texts and statuses over HTTP and gRPC; unloading what is not loaded succeeds", async () => {
    const unknown = await get('/v2/models/nope')
    assert.equal(unknown.status, 404)
    assert.match(unknown.json.error, /^Request for unknown model: 'nope' is not found/)
    assert.equal((await get('/v2/models/nope/ready')).status, 404)
    const infer = await post('/v2/models/nope/infer', neg(1))
    assert.equal(infer.status, 404)
    const grpcUnknown = await grpcError(grpc.call('ModelMetadata', { name: 'nope' }), 5)
    assert.match(grpcUnknown.details, /^Request for unknown model: 'nope' is not found/)
    await grpcError(grpc.call('ModelReady', { name: 'nope' }), 5)
    // Known but not loaded: ModelReady is OK with ready false; metadata NOT_FOUND; statistics INVALID_ARGUMENT.
    assert.equal((await post('/v2/repository/models/simple_int8/unload')).status, 200)
    assert.deepEqual(await grpc.call('ModelReady', { name: 'simple_int8' }), { ready: false })
    const meta = await grpcError(grpc.call('ModelMetadata', { name: 'simple_int8' }), 5)
    assert.match(meta.details, /has no available versions/)
    const stats = await grpcError(grpc.call('ModelStatistics', { name: 'simple_int8' }), 3)
    assert.match(stats.details, /requested model 'simple_int8' is not available/)
    assert.equal((await post('/v2/repository/models/simple_int8/unload')).status, 200, 'already unloaded')
    assert.equal((await post('/v2/repository/models/nope/unload')).status, 200, 'unknown: nothing to unload')
    const load = await post('/v2/repository/models/nope/load')
    assert.equal(load.status, 404)
    assert.match(load.json.error, /^failed to load 'nope': the store has no model named nope/)
  })

  it("Triton's Python gRPC client calls: is_model_ready is False after unload_model, and True only when loaded", {
    skip: pythonGrpc || process.env.BUNDLE_REQUIRE_GRPC_PYTHON === '1' ? false : 'python3-grpcio is not installed',
    timeout: 180_000,
  }, async () => {
    const { stdout } = await promisify(execFile)(
      PYTHON,
      [
        join(root, 'test', 'fixtures', 'triton_grpc_calls.py'),
        join(root, 'docs'),
        tempDir(),
        server.grpcUrl!.replace('grpc://', ''),
        'torch_batch',
      ],
      { timeout: 170_000 },
    ).catch(async (err) => {
      throw new Error(`${err.message}\n${err.stderr}`)
    })
    const seen = JSON.parse(stdout)
    assert.deepEqual(seen.ready_unknown, {
      status: 'StatusCode.NOT_FOUND',
      msg: seen.ready_unknown.msg,
    })
    assert.match(seen.ready_unknown.msg, /^Request for unknown model: 'no_such_model' is not found/)
    assert.match(seen.metadata_unknown.msg, /^Request for unknown model: 'no_such_model' is not found/)
    assert.deepEqual(seen.ready_before, { ok: false })
    assert.deepEqual(seen.load, { ok: true })
    assert.deepEqual(seen.ready_loaded, { ok: true })
    assert.deepEqual(seen.config, { ok: { max_batch_size: 4, instances: [2], dims: [[3]], window_us: 2000 } })
    assert.deepEqual(seen.unload, { ok: true })
    assert.deepEqual(seen.ready_after_unload, { ok: false })
    assert.equal(seen.metadata_after_unload.status, 'StatusCode.NOT_FOUND')
    assert.match(seen.metadata_after_unload.msg, /^Request for unknown model: 'torch_batch' has no available versions/)
    assert.equal(seen.bad_config.status, 'StatusCode.INVALID_ARGUMENT')
    assert.match(seen.bad_config.msg, /^failed to load 'torch_batch'/)
    assert.deepEqual(seen.unload_unknown, { ok: true })
    const row = seen.index.find((m: string[]) => m[0] === 'torch_batch')
    assert.equal(row[2], 'UNAVAILABLE')
  })
})
