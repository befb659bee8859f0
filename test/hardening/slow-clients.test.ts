// test-slot: exclusive (it measures latency or throughput on the machine's cores: see scripts/test-slot.mjs)
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { parsePrometheus } from '../utils/prom.js'
import { openFds, until } from '../utils/procs.js'
import { serveReady, type Served } from '../utils/serve.js'

// Slowloris and friends against a real `bundle serve` of the quickstart: hundreds of raw
// sockets that trickle headers, trickle a body, or say nothing, while normal clients keep
// calling. The server runs with short timeouts (the flags users set) so this takes seconds.

const HEADERS_MS = 2_000
const REQUEST_MS = 4_000
const KEEP_ALIVE_MS = 1_000
const SEND_MS = 2_000
const MAX_CONNECTIONS = 450
// Node checks the deadlines every connectionsCheckingInterval (≤ 1 s); the rest is a loaded 2-core machine.
const MARGIN_MS = 3_000
const PNG = readFileSync(new URL('../fixtures/images/hello-180.png', import.meta.url))

interface Slow {
  kind: 'headers' | 'body' | 'silent'
  opened: number
  closedAfter: Promise<number>
  received: () => string
}

/**
 * A raw socket that misbehaves as `kind` says and never finishes its request; resolves with ms until the server closed
 * it.
 */
function slowSocket(port: number, kind: Slow['kind']): Slow {
  const sock = connect(port, '127.0.0.1')
  const opened = Date.now()
  let received = ''
  let drip: NodeJS.Timeout | undefined
  sock.on('error', () => undefined)
  sock.on('data', (d) => (received += d))
  sock.on('connect', () => {
    if (kind === 'headers') {
      // A byte at a time of a request line and header that never end.
      const text = `POST /classify HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(1000)}`
      let i = 0
      drip = setInterval(() => sock.writable && sock.write(text[i++ % text.length]!), 700)
    } else if (kind === 'body') {
      sock.write(
        'POST /classify HTTP/1.1\r\nHost: localhost\r\nContent-Type: image/png\r\nContent-Length: 1048576\r\n\r\n',
      )
      drip = setInterval(() => sock.writable && sock.write('x'), 700)
    }
  })
  const closedAfter = new Promise<number>((resolve) =>
    sock.on('close', () => {
      clearInterval(drip)
      resolve(Date.now() - opened)
    }),
  )
  return { kind, opened, closedAfter, received: () => received }
}

/** One request on a fresh connection (as a new client would arrive): status and latency. */
function call(port: number, path: string, body?: Buffer): Promise<{ status: number; ms: number; body?: string }> {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body ? 'POST' : 'GET',
        agent: false,
        headers: body ? { 'content-type': 'image/png', 'content-length': body.length } : {},
        timeout: 10_000,
      },
      (res) => {
        let text = ''
        res.on('data', (d) => (text += d))
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            ms: performance.now() - started,
            ...(res.statusCode === 200 ? {} : { body: text.slice(0, 200) }),
          }),
        )
      },
    )
    req.on('timeout', () => req.destroy(new Error('client timeout')))
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }))
    req.end(body)
  })
}

const p99 = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!

async function closedCount(url: string, reason: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  return (
    parsePrometheus(text).find((s) => s.name === 'bundle_http_connections_closed_total' && s.labels.reason === reason)
      ?.value ?? 0
  )
}

async function settle(pid: number, target: number, ms: number): Promise<number> {
  const end = Date.now() + ms
  let n = openFds(pid)
  while (n > target && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100))
    n = openFds(pid)
  }
  return n
}

describe('slow clients cannot exhaust bundle serve', { timeout: 120_000 }, () => {
  let server: Served
  let port: number
  let baseline: number
  before(async () => {
    server = await serveReady(
      'examples/quickstart/service.ts',
      [
        '--headers-timeout',
        String(HEADERS_MS),
        '--request-timeout',
        String(REQUEST_MS),
        '--keep-alive-timeout',
        String(KEEP_ALIVE_MS),
        '--send-timeout',
        String(SEND_MS),
        '--max-connections',
        String(MAX_CONNECTIONS),
        // The batcher's own shedding (its latency bound) is not under test here, and on a shared
        // 2-core machine it may shed a request whatever the sockets do.
      ],
      { BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_LATENCY_MS: '20000' },
    )
    port = server.port
    // Warm: the first image call loads sharp; the fd count settles after the probes' sockets close.
    assert.equal((await call(port, '/classify', PNG)).status, 200)
    await new Promise((r) => setTimeout(r, KEEP_ALIVE_MS + 1_500))
    baseline = openFds(server.pid)
  })
  after(() => server?.stop())

  it('400 trickling or silent sockets are closed at their deadlines while normal clients get prompt 200s', async () => {
    const slow: Slow[] = [
      ...Array.from({ length: 150 }, () => slowSocket(port, 'headers')),
      ...Array.from({ length: 150 }, () => slowSocket(port, 'body')),
      ...Array.from({ length: 100 }, () => slowSocket(port, 'silent')),
    ]
    // Before the first deadline (headers, 2 s) closes any of them.
    const holding = () => openFds(server.pid) >= baseline + 350
    await until(`the server to hold the slow sockets (fd baseline ${baseline})`, holding, HEADERS_MS)
    const during = openFds(server.pid)

    // Normal clients, four at a time on fresh connections, for as long as the attack lasts.
    let attacking = true
    const closedAll = Promise.all(slow.map((s) => s.closedAfter)).then(() => (attacking = false))
    const results: { path: string; status: number; ms: number; body?: string }[] = []
    await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        while (attacking) {
          const path = i % 2 === 0 ? '/classify' : '/readyz'
          results.push({ path, ...(await call(port, path, path === '/classify' ? PNG : undefined)) })
        }
      }),
    )
    await closedAll

    const failed = results.filter((r) => r.status !== 200)
    assert.equal(
      failed.length,
      0,
      `every normal request succeeds during the attack: ${JSON.stringify(failed.slice(0, 5))}`,
    )
    assert.ok(
      results.filter((r) => r.path === '/classify').length >= 20,
      `normal clients were served throughout (${results.length} requests)`,
    )
    const latency = p99(results.map((r) => r.ms))
    console.log(
      `${results.length} normal requests during the attack, p99 ${latency.toFixed(1)} ms; server fds: baseline ` +
        `${baseline}, during ${during}`,
    )
    assert.ok(latency < 1_000, `p99 latency of normal requests during the attack: ${latency.toFixed(0)} ms`)

    // Each kind is closed by the server at its own deadline, not before and not much after.
    for (const [kind, deadline] of [
      ['headers', HEADERS_MS],
      ['silent', HEADERS_MS],
      ['body', REQUEST_MS],
    ] as const) {
      const times = await Promise.all(slow.filter((s) => s.kind === kind).map((s) => s.closedAfter))
      console.log(`${kind}: closed after ${Math.min(...times)}–${Math.max(...times)} ms (deadline ${deadline} ms)`)
      assert.ok(
        Math.min(...times) >= deadline * 0.8,
        `${kind}: none closed before its deadline (${Math.min(...times)} ms < ${deadline})`,
      )
      assert.ok(
        Math.max(...times) <= deadline + MARGIN_MS,
        `${kind}: all closed by the server within ${deadline} + ${MARGIN_MS} ms (slowest ${Math.max(...times)} ms)`,
      )
    }
    // They are told why, in the JSON error shape (a silent one too: it never sent a request line).
    for (const s of slow.filter((x) => x.kind !== 'body'))
      assert.match(s.received(), /^HTTP\/1\.1 408 [\s\S]*"code":"E_HTTP_REQUEST_TIMEOUT"/)
    assert.ok(
      (await closedCount(server.url, 'slow_request')) >= 400,
      'counted in bundle_http_connections_closed_total{reason="slow_request"}',
    )

    const settled = await settle(server.pid, baseline + 3, 5_000)
    assert.ok(settled <= baseline + 3, `the server's open fds return to baseline: ${settled} (baseline ${baseline})`)
  })

  it('an idle keep-alive connection is closed after --keep-alive-timeout', async () => {
    const sock = connect(port, '127.0.0.1')
    sock.on('error', () => undefined)
    let answered = 0
    sock.on('data', () => (answered ||= Date.now()))
    const closed = new Promise<number>((r) => sock.on('close', () => r(Date.now())))
    sock.write('GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n')
    const idle = (await closed) - answered
    assert.ok(answered > 0, 'answered first')
    // Node.js keeps a connection 1 s past keepAliveTimeout, so a request sent just before it closes is not lost.
    assert.ok(
      idle >= KEEP_ALIVE_MS * 0.8 && idle <= KEEP_ALIVE_MS + 1_000 + MARGIN_MS,
      `closed ${idle} ms after the answer`,
    )
  })

  it('a client that stops reading a large response is disconnected after the send timeout', async () => {
    const before = await closedCount(server.url, 'send_stalled')
    // 60 pipelined requests for Swagger UI's bundle (≈1.4 MB each): far more than socket buffers hold.
    const asset = (await (await fetch(`${server.url}/docs/assets/swagger-ui-bundle.js`)).arrayBuffer()).byteLength
    const sock: Socket = connect(port, '127.0.0.1')
    sock.on('error', () => undefined)
    await new Promise((r) => sock.once('connect', r))
    sock.pause()
    sock.write('GET /docs/assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(60))
    const started = Date.now()
    while (
      (await closedCount(server.url, 'send_stalled')) === before &&
      Date.now() - started < SEND_MS + MARGIN_MS + 5_000
    )
      await new Promise((r) => setTimeout(r, 200))
    const after = Date.now() - started
    assert.ok(
      (await closedCount(server.url, 'send_stalled')) > before,
      'the stalled connection was closed by the server (send_stalled counted)',
    )
    assert.ok(after <= SEND_MS + MARGIN_MS + 2_000, `closed ${after} ms after the client stopped reading`)
    // Reading again, the client gets what was in flight, then the end of the connection: not all 60 answers.
    let got = 0
    sock.on('data', (d: Buffer) => (got += d.length))
    const closed = new Promise((r) => sock.on('close', r))
    sock.resume()
    await closed
    assert.ok(got < asset * 60, `the response was cut off (${got} of ${asset * 60} bytes)`)
    const settled = await settle(server.pid, baseline + 3, 5_000)
    assert.ok(settled <= baseline + 3, `fds back to baseline: ${settled} (baseline ${baseline})`)
    assert.equal((await call(port, '/readyz')).status, 200)
  })

  it(
    `connections past --max-connections (${MAX_CONNECTIONS}) are closed at once; the server serves again when ` +
      `they go`,
    async () => {
      // MAX_CONNECTIONS + 20 silent sockets at once: whichever the server accepts first it holds until the headers
      // deadline; the rest it closes at once. Counting by outcome needs no guess of when the server is full (a
      // keep-alive connection left from an earlier call may hold a slot for a moment, so "at least 20").
      const before = await closedCount(server.url, 'max_connections')
      const sockets = Array.from({ length: MAX_CONNECTIONS + 20 }, () => slowSocket(port, 'silent'))
      let peak = 0
      const watch = setInterval(() => (peak = Math.max(peak, openFds(server.pid))), 50)
      const times = await Promise.all(sockets.map((s) => s.closedAfter)).finally(() => clearInterval(watch))
      const atOnce = times.filter((t) => t < 1_000).length
      const held = times.filter((t) => t >= HEADERS_MS - 200).length
      assert.ok(
        atOnce >= 20 && atOnce <= 25,
        `over the cap: ${atOnce} closed at once (expected 20, a few more allowed)`,
      )
      assert.ok(held >= MAX_CONNECTIONS - 5, `${held} held until the headers deadline (cap ${MAX_CONNECTIONS})`)
      assert.ok(
        peak <= baseline + MAX_CONNECTIONS + 5,
        `the server never holds more than the cap (peak ${peak} fds, baseline ${baseline})`,
      )
      assert.equal((await call(port, '/classify', PNG)).status, 200)
      assert.ok(
        (await closedCount(server.url, 'max_connections')) - before >= 20,
        'counted in bundle_http_connections_closed_total{reason="max_connections"}',
      )
    },
  )
})
