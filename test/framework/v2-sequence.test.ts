import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { status as Status } from '@grpc/grpc-js'
import pino from 'pino'
import { onnxRunner, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { f32, grpcError, inferenceClient, readF32, type Grpc } from '../utils/grpc.js'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'
import { runnersService, writeTwoModel } from '../utils/v2-models.js'
import { alone, frame, SAMPLES, VAD, VAD_SEQUENCE } from '../utils/vad.js'

// Triton's sequence parameters (sequence_id, sequence_start, sequence_end) over a real socket, on
// HTTP and gRPC, reaching a sequence runner: the answers are the model's with each sequence's
// state carried, whichever protocol and however the sequences' requests interleave.

describe('/v2 sequence parameters to a stateful model (HTTP and gRPC, real socket)', () => {
  let running: RunningServer
  let client: Grpc
  const home = join(tempDir(), 'home')
  const dir = tempDir()

  before(async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'silero-vad', version: '1.0.0', paths: [VAD] })
    await store.save({ name: 'two', version: '1.0.0', paths: [writeTwoModel(join(dir, 'two.onnx'))] })
    store.close()
    const vad = onnxRunner('silero-vad:1.0.0', {
      home,
      workers: 1,
      sequence: { ...VAD_SEQUENCE, idleTimeoutMs: 30_000 },
      batching: { maxBatchSize: 16 },
      warmup: { shapes: { input: [SAMPLES] } },
    })
    const two = onnxRunner('two:1.0.0', { home, workers: 1 })
    running = await serve(runnersService('vad-v2', [vad, two]), {
      port: 0,
      grpcPort: 0,
      logger: pino({ level: 'silent' }),
      handleSignals: false,
      storeHome: home,
    })
    client = inferenceClient(running.grpcUrl!)
    await until('the server to be ready', async () => (await fetch(`${running.url}/v2/health/ready`)).status === 200)
  })
  after(async () => {
    client?.close()
    await running?.close()
  })

  const infer = async (model: string, body: unknown) => {
    const r = await fetch(`${running.url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) })
    return { status: r.status, json: (await r.json()) as any }
  }
  const vadRequest = (data: Float32Array, parameters: Record<string, unknown>) => ({
    inputs: [{ name: 'input', datatype: 'FP32', shape: [1, SAMPLES], data: Array.from(data) }],
    parameters,
  })

  it('the model shows only what a client sends and gets, and its sequence batching', async () => {
    const meta = (await (await fetch(`${running.url}/v2/models/silero-vad`)).json()) as any
    assert.deepEqual(
      meta.inputs.map((i: { name: string }) => i.name),
      ['input'],
      'state and constants are the runner’s',
    )
    assert.deepEqual(
      meta.outputs.map((o: { name: string }) => o.name),
      ['output'],
    )
    const config = (await (await fetch(`${running.url}/v2/models/silero-vad/config`)).json()) as any
    assert.equal(config.dynamic_batching, undefined, 'one scheduler per model, as in Triton')
    assert.equal(config.sequence_batching.max_sequence_idle_microseconds, 30_000_000)
    assert.deepEqual(config.sequence_batching.state, [
      { input_name: 'h', output_name: 'hn', data_type: 'TYPE_FP32', dims: [2, 64], batch_axis: 1 },
      { input_name: 'c', output_name: 'cn', data_type: 'TYPE_FP32', dims: [2, 64], batch_axis: 1 },
    ])
    // The same over gRPC, in Triton's ModelConfig message (its sequence_batching, field 13).
    const { config: wire } = await client.call('ModelConfig', { name: 'silero-vad' })
    assert.equal(wire.scheduling_choice, 'sequence_batching')
    assert.equal(wire.sequence_batching.max_sequence_idle_microseconds, '30000000')
    assert.equal(wire.sequence_batching.strategy_choice, 'oldest')
    assert.deepEqual(
      wire.sequence_batching.state.map((s: any) => [s.input_name, s.output_name, s.data_type, s.dims]),
      [
        ['h', 'hn', 'TYPE_FP32', ['2', '64']],
        ['c', 'cn', 'TYPE_FP32', ['2', '64']],
      ],
    )
    const runners = (await (await fetch(`${running.url}/runners`)).json()) as any[]
    const vad = runners.find((r) => r.name === 'silero-vad')
    assert.equal(vad.config.sequence.idleTimeoutMs, 30_000)
    assert.deepEqual(vad.config.sequence.constants, { sr: { dtype: 'int64', shape: [1] } })
    assert.equal(typeof vad.batcher.sequences.active, 'number')
  })

  it('two sequences interleaved over HTTP (a numeric and a string id), one over gRPC: each as alone', async () => {
    const FRAMES = 4
    const want = await Promise.all([0, 1, 2].map((s) => alone(Array.from({ length: FRAMES }, (_, f) => frame(s, f)))))
    const grpcInfer = (f: number) =>
      client.call('ModelInfer', {
        model_name: 'silero-vad',
        inputs: [{ name: 'input', datatype: 'FP32', shape: [1, SAMPLES] }],
        raw_input_contents: [f32(...frame(2, f))],
        parameters: {
          sequence_id: { uint64_param: '9007199254740991' },
          ...(f === 0 ? { sequence_start: { bool_param: true } } : {}),
          ...(f === FRAMES - 1 ? { sequence_end: { bool_param: true } } : {}),
        },
      })
    const got: number[][] = [[], [], []]
    for (let f = 0; f < FRAMES; f++) {
      const flags = {
        ...(f === 0 ? { sequence_start: true } : {}),
        ...(f === FRAMES - 1 ? { sequence_end: true } : {}),
      }
      const [a, b, c] = await Promise.all([
        infer('silero-vad', vadRequest(frame(0, f), { sequence_id: 42, ...flags })),
        infer('silero-vad', vadRequest(frame(1, f), { sequence_id: 'client-b', ...flags })),
        grpcInfer(f),
      ])
      assert.equal(a.status, 200, JSON.stringify(a.json))
      assert.equal(b.status, 200, JSON.stringify(b.json))
      assert.deepEqual(
        a.json.outputs.map((o: { name: string }) => o.name),
        ['output'],
      )
      got[0]!.push(a.json.outputs[0].data[0])
      got[1]!.push(b.json.outputs[0].data[0])
      got[2]!.push(readF32(c.raw_output_contents[0])[0]!)
    }
    for (const s of [0, 1, 2])
      for (let f = 0; f < FRAMES; f++)
        assert.ok(
          Math.abs(got[s]![f]! - want[s]![f]!) < 1e-5,
          `sequence ${s} frame ${f}: ${got[s]![f]} vs ${want[s]![f]}`,
        )
    // Every sequence ended: a frame without start is refused.
    const after = await infer('silero-vad', vadRequest(frame(0, 9), { sequence_id: 42 }))
    assert.equal(after.status, 400)
    assert.match(after.json.error, /holds no sequence 42|sequence 42 has ended/)
    const metrics = parsePrometheus(await (await fetch(`${running.url}/metrics`)).text())
    const active = metrics.find((m) => m.name === 'bundle_runner_sequences_active' && m.labels.runner === 'silero-vad')
    assert.equal(active?.value, 0)
  })

  it('missing, misplaced or malformed sequence parameters are 400s that say what to send', async () => {
    const none = await infer('silero-vad', vadRequest(frame(0, 0), {}))
    assert.equal(none.status, 400)
    assert.match(none.json.error, /stateful: send parameters.sequence_id/)
    const unknown = await infer('silero-vad', vadRequest(frame(0, 0), { sequence_id: 'never' }))
    assert.equal(unknown.status, 400)
    assert.match(unknown.json.error, /no sequence "never".*start/)
    const plain = await infer('two', {
      inputs: [
        { name: 'x', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] },
        { name: 'k', datatype: 'INT64', shape: [1, 2], data: [1, 2] },
      ],
      parameters: { sequence_id: 7, sequence_start: true },
    })
    assert.equal(plain.status, 400)
    assert.match(plain.json.error, /"two" is not stateful/)
    const noId = await infer('silero-vad', vadRequest(frame(0, 0), { sequence_start: true }))
    assert.equal(noId.status, 400)
    assert.match(noId.json.error, /need a parameters.sequence_id/)
    const badFlag = await infer('silero-vad', vadRequest(frame(0, 0), { sequence_id: 1, sequence_start: 'yes' }))
    assert.equal(badFlag.status, 400)
    const err = await grpcError(
      client.call('ModelInfer', {
        model_name: 'silero-vad',
        inputs: [{ name: 'input', datatype: 'FP32', shape: [1, SAMPLES] }],
        raw_input_contents: [f32(...frame(0, 0))],
        parameters: { sequence_id: { string_param: 'grpc-never' } },
      }),
      Status.INVALID_ARGUMENT,
    )
    assert.equal(err.metadata.get('error-code')[0], 'E_SEQUENCE_UNKNOWN')
  })
})
