import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { status as Status } from '@grpc/grpc-js'
import pino from 'pino'
import { onnxRunner, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { f32, grpcError, i64, inferenceClient, readF32, readI64, type Grpc } from '../utils/grpc.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { tempDir } from '../utils/tmp.js'
import { runnersService, writeTwoModel } from '../utils/v2-models.js'
import { until } from '../utils/until.js'

// The Open Inference Protocol over gRPC with a real client (@grpc/grpc-js and the .proto the
// docs ship) on a real socket: every RPC, raw and typed tensors, errors as gRPC statuses, the
// key, statistics shared with HTTP, the repository, and many requests on one stream.

const KEY = 'grpc-test-key'

describe('Open Inference Protocol over gRPC', () => {
  let running: RunningServer
  let client: Grpc
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  const auth = { key: KEY }

  before(async () => {
    const store = ModelStore.open({ home })
    const two = writeTwoModel(join(dir, 'two.onnx'))
    const words = writeOnnxModel(join(dir, 'words.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['text'], outputs: ['same'] }],
      inputs: [{ name: 'text', dtype: 'string', dims: ['n', 2] }],
      outputs: [{ name: 'same', dtype: 'string', dims: ['n', 2] }],
    })
    await store.save({ name: 'two', version: '1.0.0', paths: [two] })
    await store.save({ name: 'words', version: '1.0.0', paths: [words] })
    await store.save({ name: 'spare', version: '1.0.0', paths: [two] })
    store.close()
    const runners = [
      onnxRunner('two:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8, maxDelayMs: 5 } }),
      onnxRunner('words:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8 } }),
    ]
    running = await serve(runnersService('grpc-test', runners), {
      port: 0,
      grpcPort: 0,
      apiKey: KEY,
      logger: pino({ level: 'silent' }),
      handleSignals: false,
      storeHome: home,
      maxBodyBytes: 64 * 1024,
    })
    assert.match(running.grpcUrl ?? '', /^grpc:\/\/127\.0\.0\.1:\d+$/)
    client = inferenceClient(running.grpcUrl!)
    await until('the server is ready over gRPC', async () => (await client.call('ServerReady', {})).ready === true)
  })
  after(async () => {
    client?.close()
    await running?.close()
  })

  const twoInputs = () => ({
    model_name: 'two',
    id: 'req-1',
    inputs: [
      { name: 'x', datatype: 'FP32', shape: [2, 3] },
      { name: 'k', datatype: 'INT64', shape: [2, 2] },
    ],
    raw_input_contents: [f32(1, -2, 3.5, 0, 4, -6), i64(7, 8, -9, 2 ** 40)],
  })

  it('health, server and model metadata and configuration answer without the key', async () => {
    assert.deepEqual(await client.call('ServerLive', {}), { live: true })
    assert.deepEqual(await client.call('ModelReady', { name: 'two' }), { ready: true })
    const server = await client.call('ServerMetadata', {})
    assert.equal(server.name, 'modelbundle')
    assert.ok(server.extensions.includes('streaming') && server.extensions.includes('model_repository'))
    const meta = await client.call('ModelMetadata', { name: 'two' })
    assert.deepEqual(meta.versions, ['1.0.0'])
    assert.equal(meta.platform, 'onnxruntime_onnx')
    assert.deepEqual(
      meta.inputs.map((t: any) => [t.name, t.datatype, t.shape]),
      [
        ['x', 'FP32', ['-1', '3']],
        ['k', 'INT64', ['-1', '2']],
      ],
    )
    const { config } = await client.call('ModelConfig', { name: 'two', version: '1.0.0' })
    assert.equal(config.name, 'two')
    assert.equal(config.max_batch_size, 8)
    assert.equal(config.backend, 'onnxruntime')
    assert.equal(config.dynamic_batching.max_queue_delay_microseconds, '5000')
    assert.equal(config.dynamic_batching.default_queue_policy.timeout_action, 'REJECT')
    assert.deepEqual(
      config.input.map((t: any) => [t.name, t.data_type, t.dims]),
      [
        ['x', 'TYPE_FP32', ['3']],
        ['k', 'TYPE_INT64', ['2']],
      ],
    )
    assert.deepEqual(
      config.instance_group.map((g: any) => [g.count, g.kind]),
      [[1, 'KIND_CPU']],
    )
    assert.equal(config.parameters.model.string_value, 'two:1.0.0')
  })

  it('ModelInfer: raw inputs in, raw outputs out, the id echoed', async () => {
    const res = await client.call('ModelInfer', twoInputs(), auth)
    assert.equal(res.model_name, 'two')
    assert.equal(res.model_version, '1.0.0')
    assert.equal(res.id, 'req-1')
    assert.deepEqual(
      res.outputs.map((o: any) => [o.name, o.datatype, o.shape]),
      [
        ['y', 'FP32', ['2', '3']],
        ['k_out', 'INT64', ['2', '2']],
      ],
    )
    assert.deepEqual(readF32(res.raw_output_contents[0]), [-1, 2, -3.5, -0, -4, 6])
    assert.deepEqual(readI64(res.raw_output_contents[1]), [7, 8, -9, 2 ** 40])
  })

  it('ModelInfer: typed contents in; requested outputs only; a named version', async () => {
    const res = await client.call(
      'ModelInfer',
      {
        model_name: 'two',
        model_version: '1.0.0',
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [0.5, -1, 2] } },
          { name: 'k', datatype: 'INT64', shape: [1, 2], contents: { int64_contents: ['-3', String(2 ** 50)] } },
        ],
        outputs: [{ name: 'k_out' }],
      },
      auth,
    )
    assert.deepEqual(
      res.outputs.map((o: any) => o.name),
      ['k_out'],
    )
    assert.equal(res.raw_output_contents.length, 1)
    assert.deepEqual(readI64(res.raw_output_contents[0]), [-3, 2 ** 50])
  })

  it('BYTES tensors: raw (length-prefixed) and bytes_contents', async () => {
    const lp = (...s: string[]) =>
      Buffer.concat(s.flatMap((v) => [Buffer.from(new Uint32Array([Buffer.byteLength(v)]).buffer), Buffer.from(v)]))
    const raw = await client.call(
      'ModelInfer',
      {
        model_name: 'words',
        inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, 2] }],
        raw_input_contents: [lp('héllo', '')],
      },
      auth,
    )
    assert.equal(raw.outputs[0].datatype, 'BYTES')
    assert.deepEqual(raw.raw_output_contents[0], lp('héllo', ''))
    const typed = await client.call(
      'ModelInfer',
      {
        model_name: 'words',
        inputs: [
          {
            name: 'text',
            datatype: 'BYTES',
            shape: [1, 2],
            contents: { bytes_contents: [Buffer.from('a'), Buffer.from('ß')] },
          },
        ],
      },
      auth,
    )
    assert.deepEqual(typed.raw_output_contents[0], lp('a', 'ß'))
  })

  it('errors are gRPC statuses with a message a user can act on and the code in a trailer', async () => {
    const noKey = await grpcError(client.call('ModelInfer', twoInputs()), Status.UNAUTHENTICATED)
    assert.match(noKey.details, /API key/)
    const unknown = await grpcError(
      client.call('ModelInfer', { ...twoInputs(), model_name: 'nope' }, auth),
      Status.NOT_FOUND,
    )
    assert.match(unknown.details, /^Request for unknown model: 'nope' is not found/)
    assert.equal(unknown.metadata.get('error-code')[0], 'E_MODEL_NOT_FOUND')
    await grpcError(client.call('ModelMetadata', { name: 'nope' }), Status.NOT_FOUND)
    const wrongType = twoInputs()
    wrongType.inputs[0]!.datatype = 'FP64'
    wrongType.raw_input_contents[0] = Buffer.alloc(48)
    const dtype = await grpcError(client.call('ModelInfer', wrongType, auth), Status.INVALID_ARGUMENT)
    assert.match(dtype.details, /input "x": expected datatype FP32, got FP64/)
    const wrongShape = twoInputs()
    wrongShape.inputs[0]!.shape = [3, 2]
    const shape = await grpcError(client.call('ModelInfer', wrongShape, auth), Status.INVALID_ARGUMENT)
    assert.match(shape.details, /input "x": expected shape \[-1,3\]/)
    // A wrong rank over raw_input_contents is said as a rank, in gRPC's terms (not HTTP's binary_data_size).
    const wrongRank = twoInputs()
    wrongRank.inputs[0]!.shape = [6]
    const rank = await grpcError(client.call('ModelInfer', wrongRank, auth), Status.INVALID_ARGUMENT)
    assert.match(rank.details, /input "x": expected rank 2 \(shape \[-1,3\], -1 = any\), got rank 1/)
    const fewBytes = twoInputs()
    fewBytes.raw_input_contents[0] = f32(1, 2, 3)
    const size = await grpcError(client.call('ModelInfer', fewBytes, auth), Status.INVALID_ARGUMENT)
    assert.match(size.details, /input "x": raw_input_contents\[0\] has 12 bytes; shape \[2,3\] of FP32 needs 24/)
    assert.doesNotMatch(size.details, /binary_data_size/)
    const unknownInput = twoInputs()
    unknownInput.inputs[1]!.name = 'y'
    const named = await grpcError(client.call('ModelInfer', unknownInput, auth), Status.INVALID_ARGUMENT)
    assert.match(named.details, /model "two" has no input "y" \(its inputs: "x", "k"\)/)
    const short = { ...twoInputs(), raw_input_contents: [f32(1, 2, 3, 4, 5, 6)] }
    assert.match(
      (await grpcError(client.call('ModelInfer', short, auth), Status.INVALID_ARGUMENT)).details,
      /raw_input_contents has 1 entries for 2 inputs/,
    )
    const big = { ...twoInputs(), raw_input_contents: [Buffer.alloc(128 * 1024), i64(1, 2, 3, 4)] }
    await grpcError(client.call('ModelInfer', big, auth), Status.RESOURCE_EXHAUSTED)
    // The server went on serving.
    assert.equal((await client.call('ModelInfer', twoInputs(), auth)).id, 'req-1')
  })

  it('ModelStatistics counts what gRPC ran, the same numbers /v2 over HTTP shows', async () => {
    const before = (await client.call('ModelStatistics', { name: 'two' })).model_stats[0]
    await Promise.all(Array.from({ length: 5 }, () => client.call('ModelInfer', twoInputs(), auth)))
    const grpc = (await client.call('ModelStatistics', { name: 'two' })).model_stats[0]
    assert.equal(Number(grpc.inference_count) - Number(before.inference_count), 10, '5 requests of 2 rows')
    assert.ok(Number(grpc.inference_stats.success.count) >= 5)
    assert.ok(grpc.batch_stats.length >= 1 && Number(grpc.batch_stats[0].compute_infer.ns) > 0)
    const http = (await (await fetch(`${running.url}/v2/models/two/stats`)).json()) as any
    assert.equal(String(http.model_stats[0].inference_count), grpc.inference_count)
    assert.equal(String(http.model_stats[0].execution_count), grpc.execution_count)
    const all = (await client.call('ModelStatistics', {})).model_stats.map((s: any) => s.name)
    assert.deepEqual(all.sort(), ['two', 'words'])
  })

  it('the repository: index, load, infer on it, unload', async () => {
    await grpcError(client.call('RepositoryIndex', {}), Status.UNAUTHENTICATED)
    const index = (await client.call('RepositoryIndex', {}, auth)).models
    assert.deepEqual(
      index.map((m: any) => [m.name, m.state]),
      [
        ['spare', 'UNAVAILABLE'],
        ['two', 'READY'],
        ['words', 'READY'],
      ],
    )
    assert.deepEqual((await client.call('RepositoryIndex', { ready: true }, auth)).models.length, 2)
    await client.call(
      'RepositoryModelLoad',
      { model_name: 'spare', parameters: { config: { string_param: '{"workers":1}' } } },
      auth,
    )
    const res = await client.call('ModelInfer', { ...twoInputs(), model_name: 'spare' }, auth)
    assert.deepEqual(readF32(res.raw_output_contents[0]), [-1, 2, -3.5, -0, -4, 6])
    await client.call('RepositoryModelUnload', { model_name: 'spare' }, auth)
    await grpcError(client.call('ModelInfer', { ...twoInputs(), model_name: 'spare' }, auth), Status.NOT_FOUND)
    const badLoad = await grpcError(
      client.call('RepositoryModelLoad', { model_name: 'missing' }, auth),
      Status.NOT_FOUND,
    )
    assert.match(badLoad.details, /missing/)
  })

  it('ModelStreamInfer: many requests on one stream, concurrent unary calls beside it', async () => {
    const stream = client.stream(auth)
    const answers = new Map<string, any>()
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: any) => answers.set(m.infer_response.id, m))
      stream.on('end', resolve)
      stream.on('error', reject)
    })
    const n = 40
    for (let i = 0; i < n; i++)
      stream.write({
        model_name: 'two',
        id: `s${i}`,
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [1, 3] },
          { name: 'k', datatype: 'INT64', shape: [1, 2] },
        ],
        raw_input_contents: [f32(i, i + 1, i + 2), i64(i, 100 - i)],
      })
    // A bad request on the stream fails alone.
    stream.write({ model_name: 'nope', id: 'bad', inputs: [] })
    const unary = Array.from({ length: 16 }, () => client.call('ModelInfer', twoInputs(), auth))
    stream.end()
    await done
    for (const r of await Promise.all(unary)) assert.deepEqual(readI64(r.raw_output_contents[1]), [7, 8, -9, 2 ** 40])
    assert.equal(answers.size, n + 1)
    for (let i = 0; i < n; i++) {
      const a = answers.get(`s${i}`)
      assert.equal(a.error_message, '')
      assert.deepEqual(readF32(a.infer_response.raw_output_contents[0]), [-i, -i - 1, -i - 2])
      assert.deepEqual(readI64(a.infer_response.raw_output_contents[1]), [i, 100 - i])
    }
    const bad = answers.get('bad')
    assert.match(bad.error_message, /^Request for unknown model: 'nope' is not found/)
    assert.equal(bad.infer_response.parameters.grpc_status.string_param, 'NOT_FOUND')
    assert.equal(bad.infer_response.parameters.error_code.string_param, 'E_MODEL_NOT_FOUND')
  })

  it('a stream without the key is refused; the gRPC metrics count requests by RPC and code', async () => {
    const stream = client.stream()
    const err = await new Promise<any>((resolve) => {
      stream.on('error', resolve)
      stream.on('data', () => undefined)
    })
    assert.equal(err.code, Status.UNAUTHENTICATED)
    const text = await (await fetch(`${running.url}/metrics`)).text()
    const count = (rpc: string, code: string) =>
      Number(
        new RegExp(`^bundle_grpc_requests_total\\{service="grpc-test",rpc="${rpc}",code="${code}"\\} (\\d+)`, 'm').exec(
          text,
        )?.[1] ?? 0,
      )
    assert.ok(count('ModelInfer', 'OK') >= 20, text)
    assert.ok(count('ModelInfer', 'UNAUTHENTICATED') >= 1)
    assert.ok(count('ModelStreamInfer', 'OK') >= 40)
    assert.ok(count('ModelStreamInfer', 'NOT_FOUND') >= 1)
    assert.match(text, /^bundle_grpc_streams_open\{service="grpc-test"\} 0$/m)
  })
})
