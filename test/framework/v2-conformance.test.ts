// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { defineService, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { conformanceCases, type ConformanceCase } from '../utils/conformance-models.js'
import { inferenceClient } from '../utils/grpc.js'
import { tempDir } from '../utils/tmp.js'
import { difference } from '../utils/tensor-compare.js'
import {
  binaryRequest,
  grpcAnswer,
  grpcRequest,
  httpAnswer,
  jsonRequest,
  type PathTensor,
  rawAnswer,
} from '../utils/v2-paths.js'

// Any model onnxruntime can run, served exactly: every case of the conformance corpus (every
// dtype × scalar, fixed, fixed batch 1, variable batch, variable non-batch and zero-size shapes
// × one or two inputs and outputs, plus optional inputs, data-dependent output shapes, window
// functions and If) is saved in a real store, loaded into a running server through the
// repository API with its default settings (real worker processes), answered through HTTP JSON,
// HTTP binary, gRPC typed contents and gRPC raw contents, and compared element for element —
// bit for bit, -0 and NaN included — with what onnxruntime-node answers itself.

const cases = conformanceCases()

describe('conformance: every case answered exactly as onnxruntime-node answers it', () => {
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  let server: RunningServer
  let grpc: ReturnType<typeof inferenceClient>
  const files = new Map<string, string>()

  before(async () => {
    const store = ModelStore.open({ home })
    for (const c of cases) {
      const file = join(dir, `${c.id}.onnx`)
      writeFileSync(file, c.model)
      files.set(c.id, file)
      await store.save({ name: c.id, version: '1', paths: [file] })
    }
    store.close()
    server = await serve(defineService({ name: 'conformance', apis: {}, modelsOnly: true }), {
      port: 0,
      grpcPort: 0,
      storeHome: home,
      logger: pino({ level: 'silent' }),
      accessLog: false,
    })
    grpc = inferenceClient(server.grpcUrl!)
  })
  after(async () => {
    grpc?.close()
    await server?.close()
  })

  const post = async (path: string, body: string | Buffer, headers: Record<string, string> = {}) => {
    const r = await fetch(`${server.url}${path}`, { method: 'POST', body, headers })
    return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) }
  }

  /** Every way a client can ask; each answer must equal onnxruntime-node's, output by output. */
  async function check(c: ConformanceCase): Promise<string[]> {
    const inputs = c.inputs as PathTensor[]
    if (c.refused) {
      const r = await post(`/v2/models/${c.id}/infer`, jsonRequest(inputs), { 'content-type': 'application/json' })
      assert.equal(r.status, 400, `${c.id}: ${r.body.toString()}`)
      assert.match(r.body.toString(), c.refused)
      return []
    }
    const expected = await rawAnswer(c.model, inputs)
    const failures: string[] = []
    const compare = (path: string, got: PathTensor[]) => {
      assert.deepEqual(
        got.map((t) => t.name),
        expected.map((t) => t.name),
        `${c.id} via ${path}: output names`,
      )
      for (const [i, e] of expected.entries()) {
        const d = difference(got[i]! as never, e as never)
        if (d) failures.push(`${c.id} via ${path}, output ${e.name}: ${d}`)
      }
    }
    const json = await post(`/v2/models/${c.id}/infer`, jsonRequest(inputs), { 'content-type': 'application/json' })
    assert.equal(json.status, 200, `${c.id} via HTTP JSON: ${json.body.toString()}`)
    compare('HTTP JSON', httpAnswer(json.body, json.headers.get('inference-header-content-length')))
    const { body, headers } = binaryRequest(inputs)
    const bin = await post(`/v2/models/${c.id}/infer`, body, headers)
    assert.equal(bin.status, 200, `${c.id} via HTTP binary: ${bin.body.toString()}`)
    compare('HTTP binary', httpAnswer(bin.body, bin.headers.get('inference-header-content-length')))
    compare('gRPC raw', grpcAnswer(await grpc.call('ModelInfer', grpcRequest(c.id, inputs, true))))
    // FP16 has no typed contents list in the protocol: it travels raw only.
    if (!inputs.some((t) => t.dtype === 'float16'))
      compare('gRPC contents', grpcAnswer(await grpc.call('ModelInfer', grpcRequest(c.id, inputs, false))))
    return failures
  }

  it(`loads each of the ${cases.length} cases with default settings and answers every path exactly`, {
    timeout: 900_000,
  }, async () => {
    const failures: string[] = []
    // Two at a time: one loading while the other is asked, as a user's script would not be slower.
    const queue = [...cases]
    const worker = async () => {
      for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
        const load = await post(`/v2/repository/models/${c.id}/load`, '')
        assert.equal(load.status, 200, `${c.id}: load ${load.body.toString()}`)
        const config = (await (await fetch(`${server.url}/v2/models/${c.id}/config`)).json()) as {
          max_batch_size: number
        }
        // Batched exactly where the model allows it (every first dimension variable).
        assert.equal(config.max_batch_size > 0, c.batchable, `${c.id}: max_batch_size ${config.max_batch_size}`)
        failures.push(...(await check(c)))
        const unload = await post(`/v2/repository/models/${c.id}/unload`, '')
        assert.equal(unload.status, 200, `${c.id}: unload`)
      }
    }
    await Promise.all([worker(), worker()])
    assert.deepEqual(failures, [])
  })
})
