import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import ort from 'onnxruntime-node'
import pino from 'pino'
import { createServiceApp, defineApi, defineService, io, onnxRunner, type ServiceApp } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { parsePrometheus } from '../utils/prom.js'
import { tempDir } from '../utils/tmp.js'
import { z } from 'zod'

// The Open Inference Protocol on a service with a real runner: the requests are the ones a
// Triton or KServe client sends (JSON, and the binary tensor data extension).

const OUT = 'softmax_0.tmp_0'
const ROW = 3 * 48 * 192

const sample = (rows: number, seed = 1): Float32Array =>
  Float32Array.from({ length: rows * ROW }, (_, i) => Math.sin(i * 0.003 + seed))

async function direct(x: Float32Array, rows: number): Promise<number[]> {
  const session = await ort.InferenceSession.create(MODELS.cls)
  try {
    return Array.from(
      (await session.run({ x: new ort.Tensor('float32', x, [rows, 3, 48, 192]) }))[OUT]!.data as Float32Array,
    )
  } finally {
    await session.release()
  }
}

const close = (got: readonly number[], want: readonly number[]) => {
  assert.equal(got.length, want.length)
  for (const [i, v] of got.entries()) assert.ok(Math.abs(v - want[i]!) < 1e-4, `[${i}] ${v} vs ${want[i]}`)
}

/** A binary-extension request: JSON header, then the raw bytes of the inputs that say so. */
function binaryRequest(header: unknown, ...blobs: Uint8Array[]): { body: Buffer; headers: Record<string, string> } {
  const head = Buffer.from(JSON.stringify(header))
  return {
    body: Buffer.concat([head, ...blobs]),
    headers: { 'inference-header-content-length': String(head.byteLength), 'content-type': 'application/octet-stream' },
  }
}

function splitResponse(buf: Buffer, headerLength: string | null): { json: any; rest: Buffer } {
  const n = headerLength === null ? buf.byteLength : Number(headerLength)
  return { json: JSON.parse(buf.subarray(0, n).toString()), rest: buf.subarray(n) }
}

describe('Open Inference Protocol (/v2)', () => {
  let svc: ServiceApp
  // Made here, not in before(): a temp dir made inside a hook is removed when the hook ends.
  const home = join(tempDir(), 'home')
  const bytes = (f: Float32Array) => new Uint8Array(f.buffer, f.byteOffset, f.byteLength)
  const infer = async (body: unknown, init: { headers?: Record<string, string>; path?: string } = {}) => {
    const r = await svc.app.request(init.path ?? '/v2/models/ocr-cls/infer', {
      method: 'POST',
      body: typeof body === 'string' || body instanceof Uint8Array ? (body as never) : JSON.stringify(body),
      headers: init.headers ?? {},
    })
    return { status: r.status, headers: r.headers, buf: Buffer.from(await r.arrayBuffer()) }
  }

  before(async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-cls', version: '2.0.0', paths: [MODELS.cls] })
    store.close()
    const cls = onnxRunner('ocr-cls:2.0.0', { home, deadlineMs: 5_000, batching: { maxBatchSize: 8, maxDelayMs: 4 } })
    const def = defineService({
      name: 'v2-test',
      runners: [cls],
      apis: {
        ping: defineApi({
          input: io.json(z.object({})),
          output: io.json(z.object({ ok: z.boolean() })),
          handler: async () => ({ ok: true }),
        }),
      },
    })
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }), apiKey: 'secret' })
    await svc.start()
  })
  after(() => svc.stop())

  const auth = { authorization: 'Bearer secret' }

  it('server and model metadata, health, readiness, configuration', async () => {
    const server = (await (await svc.app.request('/v2')).json()) as {
      name: string
      version: string
      extensions: string[]
    }
    assert.equal(server.name, 'modelbundle')
    assert.match(server.version, /^\d+\.\d+\.\d+/)
    assert.ok(server.extensions.includes('binary_tensor_data'))
    assert.equal((await svc.app.request('/v2/health/live')).status, 200)
    assert.equal((await svc.app.request('/v2/health/ready')).status, 200)
    const meta = await (await svc.app.request('/v2/models/ocr-cls')).json()
    assert.deepEqual(meta, {
      name: 'ocr-cls',
      versions: ['2.0.0'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3, -1, -1] }],
      outputs: [{ name: OUT, datatype: 'FP32', shape: [-1, 2] }],
    })
    assert.deepEqual(await (await svc.app.request('/v2/models/ocr-cls/versions/2.0.0')).json(), meta)
    assert.equal((await svc.app.request('/v2/models/ocr-cls/ready')).status, 200)
    assert.equal((await svc.app.request('/v2/models/ocr-cls/versions/2.0.0/ready')).status, 200)
    const missing = await svc.app.request('/v2/models/ocr-cls/versions/9.9.9')
    assert.equal(missing.status, 404)
    assert.match(
      ((await missing.json()) as { error: string }).error,
      /Request for unknown model: 'ocr-cls' version 9\.9\.9 is not found \(loaded: 2\.0\.0\)/,
    )
    assert.equal((await svc.app.request('/v2/models/nope')).status, 404)
    const config = (await (await svc.app.request('/v2/models/ocr-cls/config')).json()) as any
    assert.equal(config.max_batch_size, 8)
    assert.equal(config.platform, 'onnxruntime_onnx')
    assert.deepEqual(config.input, [{ name: 'x', data_type: 'TYPE_FP32', dims: [3, -1, -1] }])
    assert.deepEqual(config.output, [{ name: OUT, data_type: 'TYPE_FP32', dims: [2] }])
    // Triton's names: the batch window, and the queue policy whose timeout is the deadline.
    assert.equal(config.dynamic_batching.max_queue_delay_microseconds, 4_000)
    assert.equal(config.dynamic_batching.default_queue_policy.default_timeout_microseconds, 5_000_000)
    assert.equal(config.dynamic_batching.default_queue_policy.timeout_action, 'REJECT')
  })

  it('JSON inference: flat or nested data, the id echoed, the same numbers as onnxruntime in-process', async () => {
    const x = sample(2)
    const want = await direct(x, 2)
    const flat = await infer(
      { id: 'req-1', inputs: [{ name: 'x', shape: [2, 3, 48, 192], datatype: 'FP32', data: Array.from(x) }] },
      { headers: auth },
    )
    assert.equal(flat.status, 200, flat.buf.toString())
    assert.equal(flat.headers.get('content-type'), 'application/json')
    const body = JSON.parse(flat.buf.toString())
    assert.equal(body.model_name, 'ocr-cls')
    assert.equal(body.model_version, '2.0.0')
    assert.equal(body.id, 'req-1')
    assert.deepEqual(body.outputs[0].shape, [2, 2])
    assert.equal(body.outputs[0].datatype, 'FP32')
    close(body.outputs[0].data, want)
    // Triton's request parameters: a timeout (microseconds) and a priority pass on to the batcher; bad ones are 400s.
    const timed = await infer(
      {
        inputs: [{ name: 'x', shape: [2, 3, 48, 192], datatype: 'FP32', data: Array.from(x) }],
        parameters: { timeout: 5_000_000, priority: 1 },
      },
      { headers: auth },
    )
    assert.equal(timed.status, 200, timed.buf.toString())
    for (const parameters of [{ timeout: -1 }, { timeout: 'soon' }, { priority: 'urgent' }]) {
      const bad = await infer(
        { inputs: [{ name: 'x', shape: [2, 3, 48, 192], datatype: 'FP32', data: Array.from(x) }], parameters },
        { headers: auth },
      )
      assert.equal(bad.status, 400, JSON.stringify(parameters))
      assert.match(JSON.parse(bad.buf.toString()).error, /parameters\.(timeout|priority)/)
    }
    // Nested row-major data, as numpy.tolist() gives it.
    const nested = Array.from({ length: 1 }, () =>
      Array.from({ length: 3 }, (_, c) =>
        Array.from({ length: 48 }, (_, h) =>
          Array.from(x.subarray(c * 48 * 192 + h * 192, c * 48 * 192 + (h + 1) * 192)),
        ),
      ),
    )
    const n = await infer(
      { inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'FP32', data: nested }] },
      { headers: auth },
    )
    assert.equal(n.status, 200)
    close(JSON.parse(n.buf.toString()).outputs[0].data, want.slice(0, 2))
  })

  it(
    'binary tensor data: binary inputs, binary outputs ' + 'on request (per output or for all), JSON otherwise',
    async () => {
      const x = sample(3, 7)
      const want = await direct(x, 3)
      const perOutput = binaryRequest(
        {
          inputs: [
            { name: 'x', shape: [3, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
          ],
          outputs: [{ name: OUT, parameters: { binary_data: true } }],
        },
        bytes(x),
      )
      const r = await infer(new Uint8Array(perOutput.body), { headers: { ...perOutput.headers, ...auth } })
      assert.equal(r.status, 200, r.buf.toString())
      assert.equal(r.headers.get('content-type'), 'application/octet-stream')
      const { json, rest } = splitResponse(r.buf, r.headers.get('inference-header-content-length'))
      assert.deepEqual(json.outputs, [
        { name: OUT, datatype: 'FP32', shape: [3, 2], parameters: { binary_data_size: 24 } },
      ])
      close(Array.from(new Float32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + rest.byteLength))), want)

      const all = binaryRequest(
        {
          inputs: [
            { name: 'x', shape: [3, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
          ],
          parameters: { binary_data_output: true },
        },
        bytes(x),
      )
      const r2 = await infer(new Uint8Array(all.body), { headers: { ...all.headers, ...auth } })
      assert.equal(splitResponse(r2.buf, r2.headers.get('inference-header-content-length')).rest.byteLength, 24)

      const jsonOut = binaryRequest(
        {
          inputs: [
            { name: 'x', shape: [3, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
          ],
        },
        bytes(x),
      )
      const r3 = await infer(new Uint8Array(jsonOut.body), { headers: { ...jsonOut.headers, ...auth } })
      assert.equal(r3.headers.get('content-type'), 'application/json')
      close(JSON.parse(r3.buf.toString()).outputs[0].data, want)
    },
  )

  it(
    'errors as the protocol has them: { error } with 400 ' + 'naming input, expected and got; 404; 401 without the key',
    async () => {
      const cases: [unknown, number, RegExp][] = [
        [
          { inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'INT64', data: [] }] },
          400,
          /input "x": expected datatype FP32, got INT64/,
        ],
        [
          { inputs: [{ name: 'x', shape: [3, 48, 192], datatype: 'FP32', data: Array(3 * 48 * 192).fill(0) }] },
          400,
          /input "x": expected rank 4 \(shape \[-1,3,-1,-1\], -1 = any\), got rank 3 \(shape \[3,48,192\]\)/,
        ],
        [
          { inputs: [{ name: 'y', shape: [1], datatype: 'FP32', data: [1] }] },
          400,
          /model "ocr-cls" has no input "y" \(its inputs: "x"\)/,
        ],
        // Names before values: an unknown input whose data does not fill its shape is named as unknown.
        [
          { inputs: [{ name: 'y', shape: [1, 3, 1, 1], datatype: 'FP32', data: [1] }] },
          400,
          /model "ocr-cls" has no input "y" \(its inputs: "x"\)/,
        ],
        // Rank before values: a wrong rank is said as such, not as the values its shape would need.
        [
          { inputs: [{ name: 'x', shape: [3, 1, 1], datatype: 'FP32', data: [1, 2] }] },
          400,
          /input "x": expected rank 4/,
        ],
        // Datatype before values.
        [
          { inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'INT32', data: [1.5] }] },
          400,
          /input "x": expected datatype FP32, got INT32/,
        ],
        [
          { inputs: [{ name: 'x', shape: [9, 3, 1, 1], datatype: 'FP32', data: Array(27).fill(0) }] },
          400,
          /batch of 9 is larger than ocr-cls's max_batch_size 8/,
        ],
        [
          { inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP32', data: [1, 2] }] },
          400,
          /needs 3 values, data has 2/,
        ],
        [
          { inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP16', data: [1, 2, 3] }] },
          400,
          /input "x": expected datatype FP32, got FP16/,
        ],
        [
          {
            inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP32', data: [1, 2, 3] }],
            outputs: [{ name: 'nope' }],
          },
          400,
          /unknown output "nope"/,
        ],
        // An empty list is a request (a model without inputs takes one); this model needs "x".
        [{ inputs: [] }, 400, /missing input "x"/],
        ['not json', 400, /not valid JSON/],
      ]
      for (const [body, status, re] of cases) {
        const r = await infer(body, { headers: auth })
        assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 80)}: ${r.buf}`)
        const { error } = JSON.parse(r.buf.toString()) as { error: string }
        assert.match(error, re)
      }
      const leftover = binaryRequest(
        { inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP32', data: [1, 2, 3] }] },
        new Uint8Array(8),
      )
      const r = await infer(new Uint8Array(leftover.body), { headers: { ...leftover.headers, ...auth } })
      assert.equal(r.status, 400)
      assert.match(JSON.parse(r.buf.toString()).error, /8 bytes of binary data no input claims/)
      const short = binaryRequest(
        { inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP32', parameters: { binary_data_size: 12 } }] },
        new Uint8Array(4),
      )
      assert.equal((await infer(new Uint8Array(short.body), { headers: { ...short.headers, ...auth } })).status, 400)
      assert.equal(
        (
          await infer(
            { inputs: [{ name: 'x', shape: [1], datatype: 'FP32', data: [1] }] },
            { path: '/v2/models/nope/infer', headers: auth },
          )
        ).status,
        404,
      )
      const noKey = await infer({ inputs: [{ name: 'x', shape: [1, 3, 1, 1], datatype: 'FP32', data: [1, 2, 3] }] })
      assert.equal(noKey.status, 401)
      assert.ok(typeof JSON.parse(noKey.buf.toString()).error === 'string')
    },
  )

  it('statistics count what ran, and inference goes through the runner batcher (its metrics move)', async () => {
    const before = (await (await svc.app.request('/v2/models/ocr-cls/stats')).json()) as any
    const rowsBefore = parsePrometheus(await (await svc.app.request('/metrics')).text()).find(
      (s) => s.name === 'bundle_runner_inference_total' && s.labels.runner === 'ocr-cls',
    )!.value
    const x = sample(2, 3)
    const r = await infer(
      { inputs: [{ name: 'x', shape: [2, 3, 48, 192], datatype: 'FP32', data: Array.from(x) }] },
      { headers: auth },
    )
    assert.equal(r.status, 200)
    const after = (await (await svc.app.request('/v2/models/ocr-cls/stats')).json()) as any
    const s0 = before.model_stats[0]
    const s1 = after.model_stats[0]
    assert.equal(s1.name, 'ocr-cls')
    assert.equal(s1.inference_count - s0.inference_count, 2)
    assert.equal(s1.inference_stats.success.count - s0.inference_stats.success.count, 1)
    assert.ok(s1.inference_stats.success.ns > s0.inference_stats.success.ns)
    assert.ok(s1.execution_count > s0.execution_count)
    assert.ok(s1.batch_stats.some((b: { batch_size: number }) => b.batch_size === 2))
    assert.ok(s1.inference_stats.fail.count >= 0)
    const rowsAfter = parsePrometheus(await (await svc.app.request('/metrics')).text()).find(
      (s) => s.name === 'bundle_runner_inference_total' && s.labels.runner === 'ocr-cls',
    )!.value
    assert.equal(rowsAfter - rowsBefore, 2)
    const everything = (await (await svc.app.request('/v2/models/stats')).json()) as { model_stats: { name: string }[] }
    assert.deepEqual(
      everything.model_stats.map((m) => m.name),
      ['ocr-cls'],
    )
  })
})
