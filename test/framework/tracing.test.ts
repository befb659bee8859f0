import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { newTraceparent, OtlpReceiver, type ReceivedSpan } from '../utils/otlp-receiver.js'
import { type PrivateRedis, remoteServe, until, usePrivateRedis, worker } from '../utils/remote.js'
import { type Served, serveReady } from '../utils/serve.js'

// Traces as users get them: `bundle serve --otel-endpoint` (real processes: the API server and
// its runner workers) exporting over OTLP/HTTP to a receiver in this test, which decodes what
// the SDK really sends (protobuf with the published field numbers, or JSON).

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))
const REMOTE = fileURLToPath(new URL('../fixtures/remote-service.ts', import.meta.url))
const PNG = readFileSync(new URL('../fixtures/images/hello-180.png', import.meta.url))
/** Spans leave each process within 50 ms of ending (the SDK's default is 5 s). */
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '50' }
/**
 * The SDK anchors each span on Date.now() at its start (then times it with performance.now()), so
 * two spans of one process may be placed up to a millisecond apart; processes' clocks may disagree
 * by a little more. Nothing here is timed finer.
 */
const SAME_PROCESS_MS = 1.5
const SKEW_MS = 5

const classify = (url: string, headers: Record<string, string> = {}) =>
  fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'image/png', ...headers }, body: PNG })

const one = (spans: ReceivedSpan[], test: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan => {
  const found = spans.filter(test)
  assert.equal(found.length, 1, `one ${what}; got ${found.map((s) => s.name).join(', ') || 'none'}`)
  return found[0]!
}

const within = (inner: ReceivedSpan, outer: ReceivedSpan, skew = SAME_PROCESS_MS) => {
  assert.ok(inner.start >= outer.start - skew, `${inner.name} starts inside ${outer.name}`)
  assert.ok(inner.end <= outer.end + skew, `${inner.name} ends inside ${outer.name}`)
}

const dur = (s: ReceivedSpan) => s.end - s.start

/** The complete trace of one quickstart request: server span … execute in the worker. */
const wholeRequest = (traceId: string) => (spans: ReceivedSpan[]) =>
  spans.some((s) => s.traceId === traceId && s.name === 'execute run') &&
  spans.some((s) => s.traceId === traceId && s.name === 'POST /classify')

describe('traces: OpenTelemetry over OTLP/HTTP', () => {
  let rx: OtlpReceiver
  let server: Served

  before(async () => {
    rx = await OtlpReceiver.start()
    server = await serveReady(QUICKSTART, ['--otel-endpoint', rx.url], { ...FAST_EXPORT, BUNDLE_ACCESS_LOG: '1' })
  })
  after(async () => {
    await server?.stop('SIGTERM')
    await rx?.close()
  })

  it('one request through a runner is one trace with spans from both processes, parented and adding up', {
    timeout: 60_000,
  }, async () => {
    const caller = newTraceparent()
    const r = await classify(server.url, { traceparent: caller.header })
    assert.equal(r.status, 200)
    assert.equal(((await r.json()) as { angle: number }).angle, 180)
    await rx.waitFor(wholeRequest(caller.traceId), 'whole trace of the request')
    const spans = rx.trace(caller.traceId)

    const http = one(spans, (s) => s.name === 'POST /classify', 'server span')
    assert.equal(http.parentSpanId, caller.spanId, "the server span continues the caller's traceparent")
    assert.equal(http.kind, 2) // SERVER
    assert.equal(http.attributes['http.response.status_code'], 200)
    assert.equal(http.attributes['http.route'], '/classify')
    assert.equal(http.encoding, 'protobuf', 'http/protobuf is the default protocol')
    const decode = one(spans, (s) => s.name === 'decode', 'decode span')
    const call = one(spans, (s) => s.name === 'ocr-cls.run', 'runner call span')
    const queue = one(spans, (s) => s.name === 'queue', 'queue span')
    const batch = one(spans, (s) => s.name === 'batch', 'batch span')
    const exec = one(spans, (s) => s.name === 'execute run', 'execute span')
    assert.equal(decode.parentSpanId, http.spanId)
    assert.equal(call.parentSpanId, http.spanId)
    assert.equal(queue.parentSpanId, call.spanId)
    assert.equal(batch.parentSpanId, call.spanId)
    assert.equal(exec.parentSpanId, batch.spanId, 'the worker span is a child of the batch it ran')
    assert.equal(batch.attributes['bundle.batch.size'], 1)

    // Two processes: the API server, and the runner worker that ran the batch.
    assert.equal(http.resource['bundle.process'], 'api-server')
    assert.equal(exec.resource['bundle.process'], 'runner-worker')
    assert.equal(exec.resource['bundle.runner'], 'ocr-cls')
    assert.notEqual(exec.resource['process.pid'], http.resource['process.pid'])
    assert.equal(http.resource['service.name'], 'quickstart')
    assert.equal(exec.resource['service.name'], 'quickstart')

    // Nested in time, and the call's parts add up: its queue wait, then its batch.
    for (const s of [decode, call]) within(s, http)
    within(queue, call)
    within(batch, call)
    within(exec, batch, SKEW_MS)
    assert.ok(queue.end <= batch.start + SAME_PROCESS_MS, 'the queue wait ends as the batch begins')
    const parts = dur(queue) + dur(batch)
    assert.ok(parts <= dur(call) + 0.5, `queue ${dur(queue)} + batch ${dur(batch)} fit in the call ${dur(call)}`)
    assert.ok(dur(call) - parts < Math.max(5, dur(call) * 0.5), 'little of the call is outside queue and batch')
    assert.ok(dur(decode) + dur(call) <= dur(http) + 0.5)
    // …and they add up to the request: what is left is reading the body, the method's own code
    // (the tensor from the image) and encoding the answer.
    const rest = dur(http) - dur(decode) - dur(call)
    assert.ok(rest < Math.max(5, dur(http) * 0.5), `decode ${dur(decode)} + call ${dur(call)} of ${dur(http)} ms`)

    // The access-log line names the trace and the server span.
    await until('the access-log line of the request', () => server.output().includes(caller.traceId), 10_000).catch(
      () => undefined,
    )
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes(`"trace_id":"${caller.traceId}"`))
    assert.ok(line, `an access-log line with trace_id ${caller.traceId}`)
    assert.match(line, new RegExp(`"span_id":"${http.spanId}"`))
  })

  it('a refused request: its server span has the status and the error code, not a failure of the server', {
    timeout: 60_000,
  }, async () => {
    const caller = newTraceparent()
    const r = await fetch(`${server.url}/classifyTensor`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48', traceparent: caller.header },
      body: new Uint8Array(4 * 3 * 48),
    })
    assert.equal(r.status, 400)
    await rx.waitFor(
      (spans) => spans.some((s) => s.traceId === caller.traceId && s.name === 'POST /classifyTensor'),
      'the server span of the refused request',
    )
    const http = one(rx.trace(caller.traceId), (s) => s.name === 'POST /classifyTensor', 'server span')
    assert.equal(http.attributes['http.response.status_code'], 400)
    assert.equal(http.attributes['error.type'], 'E_INPUT_INVALID')
    assert.notEqual(http.status.code, 2, "a client's mistake does not mark the server span failed")
  })

  it('a batch links the other requests it served; each request keeps its own trace', { timeout: 60_000 }, async () => {
    // 16 requests at once on one worker: while a batch runs the next ones queue and go together —
    // unless the API process decodes each image slower than the worker runs it (a busy machine),
    // when every batch holds one. Bursts are sent until one shares a batch (5 at most); every
    // batch of every burst must link exactly the other requests it served.
    let shared = 0
    for (let burst = 0; burst < 5 && shared === 0; burst++) shared = await linkedBurst()
    assert.ok(shared > 0, 'some requests shared a batch')
  })

  /** One burst of 16 traced requests, its batch spans checked; answers how many batches held more than one. */
  async function linkedBurst(): Promise<number> {
    const callers = Array.from({ length: 16 }, newTraceparent)
    const answers = await Promise.all(callers.map((c) => classify(server.url, { traceparent: c.header })))
    for (const a of answers) assert.equal(a.status, 200)
    await rx.waitFor((spans) => callers.every((c) => wholeRequest(c.traceId)(spans)), 'all 16 traces')
    const ours = new Set(callers.map((c) => c.traceId))
    const batches = rx.spans.filter((s) => s.name === 'batch' && ours.has(s.traceId))
    assert.equal(batches.length, 16, 'one batch span per request')
    const callSpans = new Map(
      rx.spans.filter((s) => s.name === 'ocr-cls.run' && ours.has(s.traceId)).map((s) => [s.spanId, s]),
    )
    let shared = 0
    for (const b of batches) {
      const requests = b.attributes['bundle.batch.requests'] as number
      assert.equal(b.links.length, requests - 1, 'a link to each other request in the batch')
      for (const l of b.links) {
        const other = callSpans.get(l.spanId)
        assert.ok(other, 'a link leads to another request’s runner call')
        assert.equal(other.traceId, l.traceId)
        assert.notEqual(l.traceId, b.traceId)
      }
      if (requests > 1) shared++
    }
    return shared
  }
})

describe('traces: runner workers as threads', () => {
  it("a thread worker's execute span joins the trace, from the API server's process", { timeout: 60_000 }, async () => {
    const rx = await OtlpReceiver.start()
    const server = await serveReady(QUICKSTART, ['--otel-endpoint', rx.url], {
      ...FAST_EXPORT,
      BUNDLE_RUNNER_OCR_CLS_ISOLATION: 'thread',
    })
    try {
      const caller = newTraceparent()
      assert.equal((await classify(server.url, { traceparent: caller.header })).status, 200)
      await rx.waitFor(wholeRequest(caller.traceId), 'whole trace of the request')
      const spans = rx.trace(caller.traceId)
      const http = one(spans, (s) => s.name === 'POST /classify', 'server span')
      const batch = one(spans, (s) => s.name === 'batch', 'batch span')
      const exec = one(spans, (s) => s.name === 'execute run', 'execute span')
      assert.equal(exec.parentSpanId, batch.spanId)
      assert.equal(exec.resource['bundle.process'], 'runner-worker')
      assert.equal(exec.resource['process.pid'], http.resource['process.pid'], 'a thread of the API process')
    } finally {
      await server.stop('SIGTERM')
      await rx.close()
    }
  })
})

describe('traces: configured by the standard variables', () => {
  it('OTEL_EXPORTER_OTLP_ENDPOINT with http/json and OTEL_SERVICE_NAME; a request without traceparent starts a trace', {
    timeout: 60_000,
  }, async () => {
    const rx = await OtlpReceiver.start()
    const server = await serveReady(QUICKSTART, [], {
      ...FAST_EXPORT,
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'classifier-eu',
    })
    try {
      assert.equal((await classify(server.url)).status, 200)
      // Each process sends its own spans: wait for the worker's and the server's.
      await rx.waitFor(
        (spans) => ['execute run', 'POST /classify'].every((n) => spans.some((s) => s.name === n)),
        'the worker and server spans',
      )
      const http = one(rx.spans, (s) => s.name === 'POST /classify', 'server span')
      assert.equal(http.parentSpanId, '', 'a root span')
      assert.equal(http.encoding, 'json')
      assert.equal(rx.requests.protobuf, 0)
      assert.equal(http.resource['service.name'], 'classifier-eu')
      const exec = one(rx.spans, (s) => s.name === 'execute run', 'execute span')
      assert.equal(exec.traceId, http.traceId)
      assert.equal(exec.resource['service.name'], 'classifier-eu')
    } finally {
      await server.stop('SIGTERM')
      await rx.close()
    }
  })

  it('OTEL_TRACES_SAMPLER=always_off sends nothing; OTEL_SDK_DISABLED=true loads no SDK', {
    timeout: 60_000,
  }, async () => {
    const rx = await OtlpReceiver.start()
    const envs: Record<string, string>[] = [{ OTEL_TRACES_SAMPLER: 'always_off' }, { OTEL_SDK_DISABLED: 'true' }]
    for (const env of envs) {
      const server = await serveReady(QUICKSTART, ['--otel-endpoint', rx.url], { ...FAST_EXPORT, ...env })
      try {
        assert.equal((await classify(server.url, { traceparent: newTraceparent().header })).status, 200)
      } finally {
        // A stop sends whatever is buffered: nothing may be.
        await server.stop('SIGTERM')
      }
      if ('OTEL_SDK_DISABLED' in env) assert.doesNotMatch(server.output(), /sending traces/)
      else assert.match(server.output(), /sending traces/)
    }
    assert.deepEqual(rx.spans, [])
    await rx.close()
  })
})

describe('traces: remote runners (BullMQ)', () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))

  it("a remote worker's spans, and its worker processes', join the request's trace", { timeout: 90_000 }, async () => {
    const rx = await OtlpReceiver.start()
    try {
      track(await worker(REMOTE, redis.url, FAST_EXPORT, ['--otel-endpoint', rx.url]))
      const api = track(await remoteServe(REMOTE, redis.url, FAST_EXPORT, ['--otel-endpoint', rx.url]))
      await until('remote API ready', async () => (await fetch(`${api.url}/readyz`)).status === 200, 60_000)
      const caller = newTraceparent()
      const r = await fetch(`${api.url}/double`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: caller.header },
        body: JSON.stringify({ x: 21 }),
      })
      assert.equal(r.status, 200)
      assert.equal(((await r.json()) as { y: number }).y, 42)
      // Each process exports its own spans when they end: wait for every one of them.
      const names = ['POST /double', 'accel.work', 'batch', 'remote work', 'execute work']
      await rx.waitFor(
        (spans) => names.every((n) => spans.some((s) => s.traceId === caller.traceId && s.name === n)),
        'the spans of the three processes',
      )
      const spans = rx.trace(caller.traceId)
      const http = one(spans, (s) => s.name === 'POST /double', 'server span')
      const call = one(spans, (s) => s.name === 'accel.work', 'runner call span')
      const batch = one(spans, (s) => s.name === 'batch', 'batch span')
      const remote = one(spans, (s) => s.name === 'remote work', 'remote worker span')
      const exec = one(spans, (s) => s.name === 'execute work', 'execute span')
      assert.equal(call.parentSpanId, http.spanId)
      assert.equal(batch.parentSpanId, call.spanId)
      assert.equal(remote.parentSpanId, batch.spanId, 'the job data carried the batch span')
      assert.equal(exec.parentSpanId, remote.spanId)
      assert.equal(http.resource['bundle.process'], 'api-server')
      assert.equal(remote.resource['bundle.process'], 'remote-worker')
      assert.equal(exec.resource['bundle.process'], 'runner-worker')
      assert.equal(new Set([http, remote, exec].map((s) => s.resource['process.pid'])).size, 3, 'three processes')
      within(remote, batch, SKEW_MS)
      within(exec, remote, SKEW_MS)
    } finally {
      await rx.close()
    }
  })
})
