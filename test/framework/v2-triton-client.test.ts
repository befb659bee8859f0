import assert from 'node:assert/strict'
import { request } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { deflateSync, gunzipSync, gzipSync, inflateSync } from 'node:zlib'
import pino from 'pino'
import { onnxRunner, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { tempDir } from '../utils/tmp.js'
import { runnersService, writeTwoModel } from '../utils/v2-models.js'

// Requests exactly as Triton's HTTP client library puts them on the wire, over a real socket,
// and responses read the way it reads them. The client cannot be installed here (no PyPI), so
// this test speaks its wire format: no Content-Type; the JSON header's length in
// Inference-Header-Content-Length; every input as binary; with no outputs requested,
// `"parameters": {"binary_data_output": true}`; optional gzip/deflate (zlib) request and
// response compression; results located by each output's binary_data_size, in output order.

interface Raw {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
}

function post(base: string, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, base),
      { method: 'POST', headers: { ...headers, 'content-length': String(body.byteLength) } },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

interface ClientInput {
  name: string
  datatype: string
  shape: number[]
  bytes: Buffer
}

/** The body and headers the client builds for `infer()`. */
function clientRequest(inputs: ClientInput[], o: { id?: string; outputs?: { name: string; binary: boolean }[] } = {}) {
  const header: Record<string, unknown> = {}
  if (o.id) header.id = o.id
  header.inputs = inputs.map((i) => ({
    name: i.name,
    shape: i.shape,
    datatype: i.datatype,
    parameters: { binary_data_size: i.bytes.byteLength },
  }))
  if (o.outputs?.length)
    header.outputs = o.outputs.map((x) => ({ name: x.name, parameters: { binary_data: x.binary } }))
  else header.parameters = { binary_data_output: true }
  const json = Buffer.from(JSON.stringify(header))
  return {
    body: Buffer.concat([json, ...inputs.map((i) => i.bytes)]),
    headers: { 'Inference-Header-Content-Length': String(json.byteLength) },
  }
}

/** What the client's InferResult does with a response: decompress, split header and binary, find each output. */
function clientResult(r: Raw): { json: any; output: (name: string) => { shape: number[]; values: number[] } } {
  const enc = r.headers['content-encoding']
  const body = enc === 'gzip' ? gunzipSync(r.body) : enc === 'deflate' ? inflateSync(r.body) : r.body
  const len = r.headers['inference-header-content-length']
  const json = JSON.parse((len === undefined ? body : body.subarray(0, Number(len))).toString('utf8'))
  const offsets = new Map<string, number>()
  let at = len === undefined ? 0 : Number(len)
  for (const o of json.outputs) {
    const size = o.parameters?.binary_data_size
    if (size !== undefined) {
      offsets.set(o.name, at)
      at += size
    }
  }
  return {
    json,
    output: (name) => {
      const o = json.outputs.find((x: { name: string }) => x.name === name)
      const start = offsets.get(name)
      if (start === undefined) return { shape: o.shape, values: o.data }
      const bytes = body.subarray(start, start + o.parameters.binary_data_size)
      const copy = new Uint8Array(bytes).buffer
      return {
        shape: o.shape,
        values: Array.from(o.datatype === 'INT64' ? new BigInt64Array(copy) : new Float32Array(copy), Number),
      }
    },
  }
}

const f32 = (...v: number[]) => Buffer.from(new Float32Array(v).buffer)
const i64 = (...v: number[]) => Buffer.from(new BigInt64Array(v.map(BigInt)).buffer)

describe('a Triton HTTP client against /v2 (its wire format, a real socket)', () => {
  let running: RunningServer
  const home = join(tempDir(), 'home')
  const dir = tempDir()

  before(async () => {
    // Two inputs and two outputs of two types: y = −x (FP32), k_out = k (INT64).
    const store = ModelStore.open({ home })
    const model = writeTwoModel(join(dir, 'two.onnx'))
    await store.save({ name: 'two', version: '1.0.0', paths: [model] })
    store.close()
    const two = onnxRunner('two:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8, maxLatencyMs: 1000 } })
    running = await serve(runnersService('triton-client', [two]), {
      port: 0,
      logger: pino({ level: 'silent' }),
      handleSignals: false,
      storeHome: home,
      maxBodyBytes: 1024 * 1024,
    })
    for (let i = 0; i < 200 && (await fetch(`${running.url}/v2/health/ready`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 50))
  })
  after(() => running.close())

  const inputs = (): ClientInput[] => [
    { name: 'x', datatype: 'FP32', shape: [2, 3], bytes: f32(1, -2, 3.5, 0, 4, -6) },
    { name: 'k', datatype: 'INT64', shape: [2, 2], bytes: i64(7, 8, -9, 2 ** 40) },
  ]

  it('infer() with defaults: binary in, every output binary out, id echoed', async () => {
    const { body, headers } = clientRequest(inputs(), { id: 'client-1' })
    const r = await post(running.url, '/v2/models/two/infer', body, headers)
    assert.equal(r.status, 200, r.body.toString())
    assert.ok(r.headers['inference-header-content-length'], 'binary outputs come with the header length')
    const res = clientResult(r)
    assert.equal(res.json.id, 'client-1')
    assert.equal(res.json.model_name, 'two')
    assert.deepEqual(res.output('y'), { shape: [2, 3], values: [-1, 2, -3.5, -0, -4, 6] })
    assert.deepEqual(res.output('k_out'), { shape: [2, 2], values: [7, 8, -9, 2 ** 40] })
  })

  it('InferRequestedOutput(binary_data=False) answers in JSON; a versioned URL works', async () => {
    const { body, headers } = clientRequest(inputs(), {
      outputs: [
        { name: 'k_out', binary: false },
        { name: 'y', binary: true },
      ],
    })
    const r = await post(running.url, '/v2/models/two/versions/1.0.0/infer', body, headers)
    assert.equal(r.status, 200)
    const res = clientResult(r)
    assert.deepEqual(
      res.json.outputs.map((o: { name: string }) => o.name),
      ['k_out', 'y'],
    )
    assert.deepEqual(res.output('k_out').values, [7, 8, -9, 2 ** 40])
    assert.deepEqual(res.output('y').values, [-1, 2, -3.5, -0, -4, 6])
  })

  it('request and response compression: gzip and deflate both ways', async () => {
    for (const [enc, pack] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
    ] as const) {
      const { body, headers } = clientRequest(inputs())
      const r = await post(running.url, '/v2/models/two/infer', pack(body), {
        ...headers,
        'Content-Encoding': enc,
        'Accept-Encoding': enc,
      })
      assert.equal(r.status, 200, r.body.toString())
      assert.equal(r.headers['content-encoding'], enc)
      assert.deepEqual(clientResult(r).output('y').values, [-1, 2, -3.5, -0, -4, 6])
    }
  })

  it('errors the client can read: {"error"} with the status; bad compression refused cleanly', async () => {
    const { body, headers } = clientRequest([inputs()[0]!])
    const missing = await post(running.url, '/v2/models/two/infer', body, headers)
    assert.equal(missing.status, 400)
    assert.match(JSON.parse(missing.body.toString()).error, /missing input "k"/)
    const unknown = await post(running.url, '/v2/models/nope/infer', body, headers)
    assert.equal(unknown.status, 404)
    assert.ok(typeof JSON.parse(unknown.body.toString()).error === 'string')
    const br = await post(running.url, '/v2/models/two/infer', body, { ...headers, 'Content-Encoding': 'br' })
    assert.equal(br.status, 415)
    assert.match(JSON.parse(br.body.toString()).error, /Content-Encoding "br" is not supported/)
    const corrupt = await post(running.url, '/v2/models/two/infer', Buffer.from('not gzip at all'), {
      ...headers,
      'Content-Encoding': 'gzip',
    })
    assert.equal(corrupt.status, 400)
    // 64 KiB of gzip that expands to 8 MiB, past this server's 1 MiB body limit.
    const bomb = await post(running.url, '/v2/models/two/infer', gzipSync(Buffer.alloc(8 * 1024 * 1024)), {
      'Content-Encoding': 'gzip',
    })
    assert.equal(bomb.status, 413)
    assert.match(JSON.parse(bomb.body.toString()).error, /expands past 1048576 bytes/)
  })

  it(
    'model control as the client calls it: index with an empty body, load with config text, unload with ' +
      'unload_dependents',
    async () => {
      const index = await post(running.url, '/v2/repository/index', Buffer.alloc(0))
      assert.equal(index.status, 200)
      assert.deepEqual(JSON.parse(index.body.toString()), [{ name: 'two', version: '1.0.0', state: 'READY' }])
      const load = await post(
        running.url,
        '/v2/repository/models/two/load',
        Buffer.from(JSON.stringify({ parameters: { config: JSON.stringify({ batching: { maxBatchSize: 4 } }) } })),
      )
      assert.equal(load.status, 200, load.body.toString())
      assert.equal(
        ((await (await fetch(`${running.url}/v2/models/two/config`)).json()) as { max_batch_size: number })
          .max_batch_size,
        4,
      )
      const unload = await post(
        running.url,
        '/v2/repository/models/two/unload',
        Buffer.from(JSON.stringify({ parameters: { unload_dependents: false } })),
      )
      assert.equal(unload.status, 200)
      // Known but not loaded: 400, as Triton answers (404 is for a model the server does not know).
      assert.equal((await fetch(`${running.url}/v2/models/two/versions/1.0.0/ready`)).status, 400)
      assert.equal((await post(running.url, '/v2/repository/models/two/load', Buffer.alloc(0))).status, 200)
      assert.equal((await fetch(`${running.url}/v2/models/two/versions/1.0.0/ready`)).status, 200)
    },
  )
})
