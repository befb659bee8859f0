import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import { defineApi, defineService, ensemble, io, onnxRunner, type RunningServer, serve } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { f32, inferenceClient, readF32 } from '../utils/grpc.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { newTraceparent, OtlpReceiver, type ReceivedSpan } from '../utils/otlp-receiver.js'
import { type PrivateRedis, until, usePrivateRedis } from '../utils/remote.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'
import { z } from 'zod'

// Traces of what a request fans out to: an ensemble's steps (over /v2 HTTP and gRPC, served in
// this process with its runners' workers exporting their own spans) and a durable task's run.

process.env.OTEL_BSP_SCHEDULE_DELAY = '50'

const vec = (name: string) => ({ name, dtype: 'float32' as const, dims: ['n', 4] })
const named = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name)
/**
 * Both steps' worker spans and the server span are in (each process sends its own spans; the
 * server span ends after every other span of its process, which are therefore in too).
 */
const complete = (traceId: string, server: string) => (spans: ReceivedSpan[]) =>
  spans.filter((s) => s.traceId === traceId && s.name === 'execute run').length === 2 &&
  spans.some((s) => s.traceId === traceId && s.name === server)

describe('traces: ensemble steps over /v2 HTTP and gRPC, and streamed answers', () => {
  let rx: OtlpReceiver
  let running: RunningServer
  const home = join(tempDir(), 'home')

  before(async () => {
    rx = await OtlpReceiver.start()
    const dir = tempDir()
    const store = ModelStore.open({ home })
    const one = (op: string) =>
      writeOnnxModel(join(dir, `${op}.onnx`), {
        nodes: [{ op, inputs: ['x'], outputs: ['y'] }],
        inputs: [vec('x')],
        outputs: [vec('y')],
      })
    await store.save({ name: 'neg', version: '1.0.0', paths: [one('Neg')] })
    await store.save({ name: 'exp', version: '1.0.0', paths: [one('Exp')] })
    store.close()
    const opts = { home, workers: 1 }
    const neg = onnxRunner('neg:1.0.0', opts)
    const exp = onnxRunner('exp:1.0.0', opts)
    // exp(−x), as two steps: the second consumes the first's output.
    const pipe = ensemble('exp-neg', {
      steps: [
        { model: neg, inputMap: { x: 'in' }, outputMap: { y: 'negx' } },
        { model: exp, inputMap: { x: 'negx' }, outputMap: { y: 'out' } },
      ],
      outputs: ['out'],
    })
    const def = defineService({
      name: 'trace-ensemble',
      runners: [neg, exp, pipe],
      apis: {
        // A streamed answer whose items each call a runner from inside the generator.
        negate: defineApi({
          input: io.json(z.object({ xs: z.array(z.number()) })),
          output: io.stream(io.json(z.object({ y: z.number() }))),
          handler: async function* ({ xs }) {
            for (const x of xs) {
              const out = await neg.run({ x: { dtype: 'float32', shape: [1, 4], data: new Float32Array(4).fill(x) } })
              yield { y: (out.y!.data as Float32Array)[0]! }
            }
          },
        }),
        // A stream that fails after its first item.
        broken: defineApi({
          input: io.json(z.object({})),
          output: io.stream(io.json(z.object({ y: z.number() }))),
          handler: async function* () {
            yield { y: 1 }
            throw new Error('the generator broke')
          },
        }),
      },
    })
    running = await serve(def, {
      port: 0,
      grpcPort: 0,
      logger: pino({ level: 'silent' }),
      handleSignals: false,
      storeHome: home,
      otelEndpoint: rx.url,
    })
  })
  after(async () => {
    await running?.close()
    await rx?.close()
  })

  /** Checks one request's trace: server span → step 1 → neg.run → … → execute, step 2 after step 1. */
  const checkTrace = (traceId: string, parent: string, serverName: string) => {
    const spans = rx.trace(traceId)
    const [server] = named(spans, serverName)
    assert.ok(server, `a ${serverName} span`)
    assert.equal(server.parentSpanId, parent)
    const steps = [named(spans, 'step 1 neg')[0], named(spans, 'step 2 exp')[0]]
    for (const [i, step] of steps.entries()) {
      assert.ok(step, `a span for step ${i + 1}`)
      assert.equal(step.parentSpanId, server.spanId)
      assert.equal(step.attributes['bundle.ensemble'], 'exp-neg')
      const call = named(spans, `${i === 0 ? 'neg' : 'exp'}.run`)[0]
      assert.ok(call, `step ${i + 1}'s runner call`)
      assert.equal(call.parentSpanId, step.spanId, "a step's runner call is inside the step")
      const batch = spans.find((s) => s.name === 'batch' && s.parentSpanId === call.spanId)
      assert.ok(batch)
      const exec = spans.find((s) => s.name === 'execute run' && s.parentSpanId === batch.spanId)
      assert.ok(exec, `step ${i + 1} ran in a worker process that joined the trace`)
      assert.equal(exec.resource['bundle.process'], 'runner-worker')
    }
    // Spans are placed on Date.now() at their start: up to a millisecond apart in one process.
    assert.ok(steps[1]!.start >= steps[0]!.end - 1.5, 'step 2 starts after step 1 ends')
  }

  it('an ensemble over /v2 HTTP: a span per step, its runner call inside it', { timeout: 60_000 }, async () => {
    const c = newTraceparent()
    const r = await fetch(`${running.url}/v2/models/exp-neg/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: c.header },
      body: JSON.stringify({ inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 4], data: [0, 1, 2, 3] }] }),
    })
    assert.equal(r.status, 200)
    const out = ((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data
    assert.ok(Math.abs(out[1]! - Math.exp(-1)) < 1e-6)
    await rx.waitFor(complete(c.traceId, 'POST /v2/models/:model/infer'), 'both steps executed, and the server span')
    checkTrace(c.traceId, c.spanId, 'POST /v2/models/:model/infer')
    const [server] = named(rx.trace(c.traceId), 'POST /v2/models/:model/infer')
    assert.equal(server!.attributes['http.response.status_code'], 200)
    assert.equal(server!.attributes['bundle.model'], 'exp-neg')
  })

  it('the same over gRPC ModelInfer, with traceparent in the metadata', { timeout: 60_000 }, async () => {
    const client = inferenceClient(running.grpcUrl!)
    try {
      const c = newTraceparent()
      const res = await client.call(
        'ModelInfer',
        {
          model_name: 'exp-neg',
          inputs: [{ name: 'in', datatype: 'FP32', shape: [1, 4] }],
          raw_input_contents: [f32(0, 1, 2, 3)],
        },
        { metadata: { traceparent: c.header } },
      )
      assert.ok(Math.abs(readF32(res.raw_output_contents[0])[2]! - Math.exp(-2)) < 1e-6)
      await rx.waitFor(
        complete(c.traceId, 'inference.GRPCInferenceService/ModelInfer'),
        'both steps executed, and the server span',
      )
      checkTrace(c.traceId, c.spanId, 'inference.GRPCInferenceService/ModelInfer')
      const [server] = named(rx.trace(c.traceId), 'inference.GRPCInferenceService/ModelInfer')
      assert.equal(server!.kind, 2)
      assert.equal(server!.attributes['rpc.system'], 'grpc')
    } finally {
      client.close()
    }
  })

  it('runner calls made while a stream is written are children of its server span', { timeout: 60_000 }, async () => {
    const c = newTraceparent()
    const r = await fetch(`${running.url}/negate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson', traceparent: c.header },
      body: JSON.stringify({ xs: [1, 2, 3] }),
    })
    assert.equal(r.status, 200)
    const items = (await r.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { y: number })
    assert.deepEqual(items, [{ y: -1 }, { y: -2 }, { y: -3 }])
    await rx.waitFor(
      (spans) => spans.some((s) => s.traceId === c.traceId && s.name === 'POST /negate'),
      "the stream's server span",
    )
    const spans = rx.trace(c.traceId)
    const [server] = named(spans, 'POST /negate')
    const calls = named(spans, 'neg.run')
    assert.equal(calls.length, 3, 'one runner call per item')
    for (const call of calls) assert.equal(call.parentSpanId, server!.spanId)
    assert.ok(server!.end >= Math.max(...calls.map((x) => x.end)) - 1.5, 'the server span lasts to the last item')
    assert.equal(server!.attributes['bundle.stream.status'], 200)
    assert.equal(server!.status.code, 0)

    // A stream that fails part way: its head said 200, its span says how it ended.
    const b = newTraceparent()
    const broken = await fetch(`${running.url}/broken`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson', traceparent: b.header },
      body: '{}',
    })
    assert.equal(broken.status, 200)
    assert.match(await broken.text(), /"error"/)
    await rx.waitFor((spans) => spans.some((s) => s.traceId === b.traceId), "the broken stream's span")
    const [span] = named(rx.trace(b.traceId), 'POST /broken')
    assert.equal(span!.attributes['http.response.status_code'], 200)
    assert.equal(span!.attributes['bundle.stream.status'], 500)
    assert.equal(span!.status.code, 2, 'marked failed')
  })
})

describe('traces: durable tasks', () => {
  let redis: PrivateRedis
  usePrivateRedis((r) => (redis = r))
  const SERVICE = fileURLToPath(new URL('../fixtures/task-service.ts', import.meta.url))

  it("a task's run joins the trace of the request that submitted it", { timeout: 60_000 }, async () => {
    const rx = await OtlpReceiver.start()
    const failFile = join(tempDir(), 'fail')
    const server = await serveReady(SERVICE, ['--redis', redis.url, '--otel-endpoint', rx.url], {
      OTEL_BSP_SCHEDULE_DELAY: '50',
      TASK_FAIL_FILE: failFile,
    })
    try {
      const c = newTraceparent()
      const r = await fetch(`${server.url}/render/submit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: c.header },
        body: JSON.stringify({ ms: 10, tag: 'traced' }),
      })
      assert.equal(r.status, 202)
      const { taskId } = (await r.json()) as { taskId: string }
      await rx.waitFor((spans) => spans.some((s) => s.name === 'task render'), 'the task span')
      const [task] = named(rx.spans, 'task render')
      assert.equal(task!.traceId, c.traceId)
      assert.equal(task!.parentSpanId, c.spanId)
      assert.equal(task!.kind, 5) // CONSUMER
      assert.equal(task!.attributes['bundle.task.id'], taskId)
      assert.equal(task!.status.code, 0, 'it succeeded')

      // A failing run: its span says so, and the server's log line about it carries the trace.
      writeFileSync(failFile, '')
      const f = newTraceparent()
      const failing = await fetch(`${server.url}/render/submit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: f.header },
        body: JSON.stringify({ ms: 10, tag: 'doomed' }),
      })
      assert.equal(failing.status, 202)
      await rx.waitFor((spans) => spans.some((s) => s.traceId === f.traceId), 'the failed task span')
      const [failed] = rx.trace(f.traceId)
      assert.equal(failed!.name, 'task render')
      assert.equal(failed!.status.code, 2, 'marked failed')
      await until('the log line of the failure', () => server.output().includes(`"trace_id":"${f.traceId}"`), 10_000)
      const line = server
        .output()
        .split('\n')
        .find((l) => l.includes(`"trace_id":"${f.traceId}"`))!
      assert.match(line, /task failed/)
      assert.match(line, new RegExp(`"span_id":"${failed!.spanId}"`))
    } finally {
      await server.stop('SIGTERM')
      await rx.close()
    }
  })
})
