import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import fc from 'fast-check'
import pino from 'pino'
import { z } from 'zod'
import {
  createServiceApp,
  defineApi,
  defineService,
  ensemble,
  io,
  onnxRunner,
  type ServiceApp,
} from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { tempDir } from '../utils/tmp.js'

// Property: whatever arrives — method, path, headers, content type, body (random bytes, broken
// JSON, truncated binary tensors, malformed multipart, images that are not) — a running server
// answers with its JSON error shape or a success, never a 500 caused by the input, never a
// crash, never a stack trace or a file path. Real runners behind it (worker processes).
// The seed is printed; replay a failure with FUZZ_SEED=<seed>.

const RUNS = Number(process.env.FUZZ_RUNS ?? 5_000)
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31)

describe('fuzzed requests against every route of a running server', () => {
  let svc: ServiceApp
  const home = join(tempDir(), 'home')
  const dir = tempDir()

  before(async () => {
    const store = ModelStore.open({ home })
    const neg = writeOnnxModel(join(dir, 'neg.onnx'), {
      nodes: [{ op: 'Neg', inputs: ['x'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['n', 4] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['n', 4] }],
    })
    await store.save({ name: 'neg', version: '1.0.0', paths: [neg] })
    const words = writeOnnxModel(join(dir, 'words.onnx'), {
      nodes: [{ op: 'Identity', inputs: ['s'], outputs: ['t'] }],
      inputs: [{ name: 's', dtype: 'string', dims: ['n'] }],
      outputs: [{ name: 't', dtype: 'string', dims: ['n'] }],
    })
    await store.save({ name: 'words', version: '1.0.0', paths: [words] })
    store.close()
    const negR = onnxRunner('neg:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8, maxLatencyMs: 1000 } })
    const wordsR = onnxRunner('words:1.0.0', { home, workers: 1, batching: { maxBatchSize: 8, maxLatencyMs: 1000 } })
    const twice = ensemble('twice', {
      steps: [
        { model: negR, inputMap: { x: 'in' }, outputMap: { y: 'mid' } },
        { model: negR, inputMap: { x: 'mid' }, outputMap: { y: 'out' } },
      ],
    })
    const def = defineService({
      name: 'fuzz',
      runners: [negR, wordsR, twice],
      apis: {
        json: defineApi({
          input: io.json(z.object({ a: z.number(), b: z.array(z.string()).max(5) })),
          output: io.json(z.object({ n: z.number() })),
          handler: async ({ a, b }) => ({ n: a + b.length }),
        }),
        text: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t.slice(0, 10) }),
        image: defineApi({
          input: io.image(),
          output: io.json(z.object({ w: z.number() })),
          handler: async (img) => ({ w: img.width }),
        }),
        tensor: defineApi({
          input: io.tensor({ dtype: 'float32', shape: [-1, 4] }),
          output: io.json(z.object({ y: z.array(z.number()) })),
          handler: async (x) => ({ y: Array.from((await negR.run({ x })).y!.data as Float32Array) }),
        }),
        file: defineApi({
          input: io.file(),
          output: io.json(z.object({ size: z.number() })),
          handler: async (f) => ({ size: f.bytes.length }),
        }),
        form: defineApi({
          input: io.multipart({ meta: io.json(z.object({ k: z.string() })), doc: io.file() }),
          output: io.json(z.object({ k: z.string() })),
          handler: async ({ meta }) => ({ k: meta.k }),
        }),
      },
    })
    svc = createServiceApp(def, {
      logger: pino({ level: 'silent' }),
      storeHome: home,
      apiKey: 'secret',
      maxBodyBytes: 256 * 1024,
    })
    await svc.start()
  })
  after(() => svc.stop())

  it(`${RUNS} generated requests: never a 500 from input, always the error shape, no internals (seed ${SEED})`, {
    timeout: 600_000,
  }, async () => {
    console.log(`# fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED})`)
    const GET = new Set([
      '/v2',
      '/v2/health/live',
      '/v2/health/ready',
      '/v2/models/neg',
      '/v2/models/neg/config',
      '/v2/models/neg/stats',
      '/readyz',
      '/metrics',
      '/runners',
      '/openapi.json',
    ])
    const routes = [
      '/json',
      '/text',
      '/image',
      '/tensor',
      '/file',
      '/form',
      ...GET,
      '/v2/models/neg/infer',
      '/v2/models/neg/versions/1.0.0/infer',
      '/v2/models/words/infer',
      '/v2/models/twice/infer',
      '/v2/models/nope/infer',
      '/v2/repository/index',
      '/v2/repository/models/neg/load',
      '/v2/repository/models/neg/unload',
      '/v2/repository/models/nope/load',
      '/nowhere',
      '/json/../v2',
    ]
    const types = [
      'application/json',
      'text/plain',
      'image/png',
      'image/jpeg',
      'application/octet-stream',
      'multipart/form-data; boundary=XyZ',
      'multipart/form-data',
      'application/x-www-form-urlencoded',
      'text/html; charset=utf-8',
      'image/svg+xml',
      '',
      'application/json; charset=utf-16',
      '*/*',
    ]
    const json = fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v))
    const inferBody = fc.record({
      id: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
      inputs: fc.array(
        fc.record({
          name: fc.constantFrom('x', 's', 'in', 'nope', ''),
          datatype: fc.constantFrom('FP32', 'FP16', 'FP64', 'INT64', 'BYTES', 'BOOL', 'UINT8', 'NOPE'),
          shape: fc.array(fc.integer({ min: -2, max: 6 }), { maxLength: 4 }),
          data: fc.oneof(
            fc.array(fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 3 }), fc.boolean()), { maxLength: 30 }),
            fc.jsonValue({ maxDepth: 2 }),
          ),
          parameters: fc.option(fc.record({ binary_data_size: fc.integer({ min: -5, max: 200 }) }), { nil: undefined }),
        }),
        { maxLength: 3 },
      ),
      outputs: fc.option(
        fc.array(
          fc.record({
            name: fc.constantFrom('y', 't', 'out', 'zz'),
            parameters: fc.option(fc.record({ binary_data: fc.boolean() }), { nil: undefined }),
          }),
          { maxLength: 2 },
        ),
        { nil: undefined },
      ),
      parameters: fc.option(fc.record({ binary_data_output: fc.boolean() }), { nil: undefined }),
    })
    const binaryTail = fc.uint8Array({ maxLength: 256 })
    const multipart = fc
      .tuple(fc.string({ maxLength: 30 }), fc.uint8Array({ maxLength: 64 }))
      .map(([s, b]) =>
        Buffer.concat([
          Buffer.from(`--XyZ\r\nContent-Disposition: form-data; name="${s}"\r\n\r\n`),
          b,
          Buffer.from(fc.sample(fc.constantFrom('\r\n--XyZ--\r\n', '', '--XyZ', '\r\n'), 1)[0]!),
        ]),
      )
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')
    const body = fc.oneof(
      json.map((s) => ({ bytes: Buffer.from(s), ihcl: undefined as number | undefined })),
      inferBody.chain((b) =>
        binaryTail.map((tail) => {
          const head = Buffer.from(JSON.stringify(b))
          return { bytes: Buffer.concat([head, tail]), ihcl: tail.length ? head.length : undefined }
        }),
      ),
      fc
        .tuple(inferBody, fc.integer({ min: -10, max: 5000 }))
        .map(([b, n]) => ({ bytes: Buffer.from(JSON.stringify(b)), ihcl: n })),
      fc.uint8Array({ maxLength: 512 }).map((b) => ({ bytes: Buffer.from(b), ihcl: undefined })),
      fc.uint8Array({ maxLength: 256 }).map((b) => ({ bytes: Buffer.concat([png, b]), ihcl: undefined })),
      multipart.map((b) => ({ bytes: b, ihcl: undefined })),
      fc.string({ maxLength: 200 }).map((s) => ({ bytes: Buffer.from(s), ihcl: undefined })),
      fc.constant({ bytes: Buffer.alloc(300 * 1024, 7), ihcl: undefined }),
    )
    const request = fc.record({
      // Mostly the route's own method; sometimes any other.
      method: fc.oneof(
        { arbitrary: fc.constant('own'), weight: 8 },
        { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), weight: 2 },
      ),
      // Unloading makes the model's routes 404 until a load: rare, so the rest stays reachable.
      route: fc.oneof(
        { arbitrary: fc.constantFrom(...routes.filter((r) => !r.endsWith('/unload'))), weight: 60 },
        { arbitrary: fc.constant('/v2/repository/models/neg/unload'), weight: 1 },
      ),
      // Mostly well-formed paths and keys, so most requests get past routing and auth to the decoders.
      suffix: fc.oneof(
        { arbitrary: fc.constant(''), weight: 12 },
        { arbitrary: fc.constant('?taskId=x'), weight: 1 },
        { arbitrary: fc.string({ maxLength: 8 }).map((s) => encodeURIComponent(s)), weight: 1 },
      ),
      type: fc.constantFrom(...types),
      auth: fc.oneof(
        { arbitrary: fc.constant('Bearer secret'), weight: 10 },
        { arbitrary: fc.constantFrom('Bearer wrong', '', 'Basic abc'), weight: 1 },
      ),
      extra: fc.record({
        'x-tensor-shape': fc.option(fc.constantFrom('2,4', '1,4', '-1,4', 'a,b', '99999999,4', ''), { nil: undefined }),
        'content-encoding': fc.option(fc.constantFrom('gzip', 'deflate', 'br', 'identity'), { nil: undefined }),
        accept: fc.option(fc.constantFrom('application/json', 'text/html', '*/*', 'garbage'), { nil: undefined }),
      }),
      body,
    })
    let sent = 0
    const notFound = new Map<string, number>()
    const statuses = new Map<number, number>()
    await fc.assert(
      fc.asyncProperty(request, async (q) => {
        const headers: Record<string, string> = {}
        if (q.type) headers['content-type'] = q.type
        if (q.auth) headers.authorization = q.auth
        if (q.body.ihcl !== undefined) headers['inference-header-content-length'] = String(q.body.ihcl)
        for (const [k, v] of Object.entries(q.extra)) if (v !== undefined) headers[k] = v
        const method = q.method === 'own' ? (GET.has(q.route) ? 'GET' : 'POST') : q.method
        const hasBody = method !== 'GET' && method !== 'OPTIONS'
        const r = await svc.app.request(q.route + q.suffix, {
          method,
          headers,
          ...(hasBody ? { body: q.body.bytes } : {}),
        })
        sent++
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
        if (r.status === 404) notFound.set(q.route, (notFound.get(q.route) ?? 0) + 1)
        const text = await r.text()
        // In-process requests never touch a socket: yield so worker replies get their turn.
        await new Promise((res) => setImmediate(res))
        assert.notEqual(r.status, 500, `500 for ${method} ${q.route}${q.suffix}: ${text.slice(0, 300)}`)
        assert.ok(r.status < 500 || r.status === 503 || r.status === 504, `${r.status} for ${method} ${q.route}`)
        assert.doesNotMatch(text, /\n\s+at [^\n]+:\d+:\d+|\/work\/|node_modules|\.ts:\d+/, 'no stack traces or paths')
        if (r.status >= 400 && q.route !== '/v2/health/ready' && q.route !== '/readyz') {
          const j = JSON.parse(text) as { error: unknown }
          assert.ok(
            typeof j.error === 'string' ||
              (typeof j.error === 'object' &&
                j.error !== null &&
                typeof (j.error as { code?: unknown }).code === 'string'),
            `error shape: ${text.slice(0, 200)}`,
          )
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
    assert.equal(sent, RUNS)
    // The server is still fine afterwards (load neg again: the fuzz may have unloaded it).
    assert.equal(
      (
        await svc.app.request('/v2/repository/models/neg/load', {
          method: 'POST',
          headers: { authorization: 'Bearer secret' },
        })
      ).status,
      200,
    )
    assert.equal((await svc.app.request('/readyz')).status, 200)
    const ok = await svc.app.request('/v2/models/neg/infer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer secret' },
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }] }),
    })
    assert.equal(ok.status, 200)
    console.log(`# statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`)
    // The generator must reach the decoders and handlers, not only routing and auth.
    const shallow = (statuses.get(401) ?? 0) + (statuses.get(404) ?? 0) + (statuses.get(405) ?? 0)
    assert.ok(
      shallow < RUNS * 0.5,
      `too many requests stopped at routing or auth: ${shallow} of ${RUNS}; 404 by route: ` +
        `${JSON.stringify(Object.fromEntries(notFound))}`,
    )
  })
})
