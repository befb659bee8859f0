import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import WebSocket from 'ws'
import { z } from 'zod'
import { defineApi, defineService, io, serve, type RunningServer } from '../../framework/index.js'
import { until } from '../utils/until.js'

// WebSocket routes: an API whose input is io.stream(…) takes a WebSocket's messages as an
// AsyncIterable and answers with one message per item it yields — over real sockets, with the
// key, limits (message size, rate, idle), metrics and shutdown of the HTTP routes.

const finished: string[] = []

let floodItems = 0

const defOptions = {
  name: 'sockets',
  traffic: { timeoutMs: 10_000, maxConcurrency: 8 },
  apis: {
    /** Sends 64 KiB messages as fast as the socket takes them, for ever. */
    flood: defineApi({
      input: io.stream(io.json(z.object({}))),
      output: io.stream(io.text()),
      handler: async function* () {
        const big = 'x'.repeat(64 * 1024)
        try {
          for (;;) {
            floodItems++
            yield big
          }
        } finally {
          finished.push('flood')
        }
      },
    }),
    double: defineApi({
      input: io.stream(io.json(z.object({ n: z.number() }))),
      output: io.stream(io.json(z.object({ double: z.number() }))),
      handler: async function* (messages) {
        try {
          for await (const { n } of messages) yield { double: 2 * n }
        } finally {
          finished.push('double')
        }
      },
    }),
    count: defineApi({
      input: io.stream(io.bytes()),
      output: io.stream(io.json(z.object({ bytes: z.number(), chunks: z.number() }))),
      // An empty message ends the input: the total goes back, then the server closes (1000).
      handler: async function* (chunks) {
        let bytes = 0
        let n = 0
        for await (const c of chunks) {
          if (c.byteLength === 0) break
          bytes += c.byteLength
          n++
        }
        yield { bytes, chunks: n }
      },
    }),
    plain: defineApi({
      input: io.json(z.object({})),
      output: io.json(z.object({ ok: z.boolean() })),
      handler: async () => ({ ok: true }),
    }),
  },
}
const def = defineService(defOptions)

interface Session {
  ws: WebSocket
  messages: unknown[]
  closed: Promise<{ code: number; reason: string }>
}

function open(url: string, path: string, headers: Record<string, string> = {}): Promise<Session> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, { headers })
  const messages: unknown[] = []
  const parse = (text: string) => {
    try {
      return JSON.parse(text)
    } catch {
      return text
    }
  }
  ws.on('message', (data, binary) => messages.push(binary ? data : parse(String(data))))
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  )
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages, closed }))
    ws.once('unexpected-response', (_req, res) =>
      reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })),
    )
    ws.once('error', reject)
  })
}

const silent = pino({ level: 'silent' })

describe('WebSocket routes', () => {
  let running: RunningServer
  before(async () => {
    running = await serve(def, {
      port: 0,
      handleSignals: false,
      logger: silent,
      websocket: { maxMessageBytes: 4096, maxMessagesPerSecond: 50, idleTimeoutMs: 5_000 },
    })
  })
  after(() => running.close())

  it('answers each message as it comes, and stops the method when the client closes', async () => {
    const s = await open(running.url, '/double')
    for (const n of [1, 2, 3]) s.ws.send(JSON.stringify({ n }))
    await until('three answers', () => s.messages.length === 3)
    assert.deepEqual(s.messages, [{ double: 2 }, { double: 4 }, { double: 6 }])
    s.ws.close(1000)
    await until('the method stopped', () => finished.includes('double'))
  })

  it('takes binary messages; the method ending closes the socket with 1000', async () => {
    const s = await open(running.url, '/count')
    for (const size of [100, 2000, 7]) s.ws.send(Buffer.alloc(size, 1))
    s.ws.send(Buffer.alloc(0))
    const { code } = await s.closed
    assert.equal(code, 1000)
    assert.deepEqual(s.messages, [{ bytes: 2107, chunks: 3 }])
  })

  it('a message that does not decode gets the coded error, then close 4400', async () => {
    const s = await open(running.url, '/double')
    s.ws.send(JSON.stringify({ n: 'three' }))
    const { code, reason } = await s.closed
    assert.equal(code, 4400)
    assert.equal(reason, 'E_INPUT_INVALID')
    assert.equal((s.messages[0] as { error: { code: string } }).error.code, 'E_INPUT_INVALID')
    // A text message on a binary route, too.
    const b = await open(running.url, '/count')
    b.ws.send('text')
    assert.equal((await b.closed).code, 4400)
  })

  it('a message over maxMessageBytes closes with 1009', async () => {
    const s = await open(running.url, '/count')
    s.ws.send(Buffer.alloc(5000))
    assert.equal((await s.closed).code, 1009)
  })

  it('more messages a second than allowed close with 4429', async () => {
    const s = await open(running.url, '/double')
    for (let i = 0; i < 200; i++) s.ws.send(JSON.stringify({ n: i }))
    const { code } = await s.closed
    assert.equal(code, 4429)
    const last = s.messages.at(-1) as { error: { code: string; message: string } }
    assert.equal(last.error.code, 'E_HTTP_TOO_MANY_REQUESTS')
    assert.match(last.error.message, /more than 50 messages a second/)
  })

  it('plain requests to a WebSocket route get 426, and the routes show in OpenAPI and metrics', async () => {
    const r = await fetch(`${running.url}/double`)
    assert.equal(r.status, 426)
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'E_HTTP_UPGRADE_REQUIRED')
    assert.equal((await fetch(`${running.url}/double`, { method: 'POST' })).status, 405)
    const doc = (await (await fetch(`${running.url}/openapi.json`)).json()) as any
    assert.deepEqual(doc.paths['/double'].get['x-websocket'].messagesIn.required, ['n'])
    assert.equal(doc.paths['/double'].post, undefined)
    const metrics = await (await fetch(`${running.url}/metrics`)).text()
    assert.match(
      metrics,
      /bundle_websocket_messages_total\{service="sockets",endpoint="double",direction="out"\} [1-9]/,
    )
    assert.match(metrics, /bundle_websocket_closed_total\{service="sockets",endpoint="double",code="4400"\} [1-9]/)
    assert.match(metrics, /bundle_websocket_closed_total\{service="sockets",endpoint="count",code="1009"\} 1/)
    await until('no session open', async () =>
      /bundle_websocket_sessions_open\{service="sockets",endpoint="double"\} 0/.test(
        await (await fetch(`${running.url}/metrics`)).text(),
      ),
    )
  })
})

describe('WebSocket routes: key, idle timeout, back-pressure, the concurrency cap, shutdown', () => {
  it('needs the key and closes idle sessions with 4408', async () => {
    const running = await serve(def, {
      port: 0,
      handleSignals: false,
      logger: silent,
      apiKey: 'sesame',
      websocket: { idleTimeoutMs: 300 },
    })
    try {
      await assert.rejects(open(running.url, '/double'), (err: { status?: number }) => err.status === 401)
      const idle = await open(running.url, '/double', { authorization: 'Bearer sesame' })
      const { code } = await idle.closed
      assert.equal(code, 4408)
      assert.equal((idle.messages[0] as { error: { code: string } }).error.code, 'E_HTTP_REQUEST_TIMEOUT')
    } finally {
      await running.close()
    }
  })

  it('a client that stops reading holds the method, not the server’s memory, and is dropped when idle', async () => {
    const running = await serve(def, {
      port: 0,
      handleSignals: false,
      logger: silent,
      websocket: { idleTimeoutMs: 1_000 },
    })
    try {
      floodItems = 0
      const s = await open(running.url, '/flood')
      // The client reads nothing more: its socket's buffers fill, then the server's.
      ;(s.ws as unknown as { _socket: { pause(): void } })._socket.pause()
      await until('the method stopped', () => finished.includes('flood'), 20_000)
      // 64 KiB items: the server's 1 MiB high-water mark and the sockets' buffers hold a few dozen.
      assert.ok(floodItems < 400, `${floodItems} items made for a client that read none of them`)
      s.ws.terminate()
    } finally {
      await running.close()
    }
  })

  it('sessions are capped at traffic.maxConcurrency apart from HTTP requests', async () => {
    const capped = defineService({ ...defOptions, name: 'capped', traffic: { timeoutMs: 10_000, maxConcurrency: 2 } })
    const running = await serve(capped, { port: 0, handleSignals: false, logger: silent })
    try {
      const a = await open(running.url, '/double')
      const b = await open(running.url, '/double')
      // Two open sessions take no HTTP request's place…
      const r = await fetch(`${running.url}/plain`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      assert.equal(r.status, 200)
      // …but a third session is refused before the upgrade.
      await assert.rejects(open(running.url, '/double'), (err: { status?: number }) => err.status === 429)
      a.ws.close()
      b.ws.close()
    } finally {
      await running.close()
    }
  })

  it('shutdown ends each session’s input and closes it with 1001 once its method has finished', async () => {
    const running = await serve(def, { port: 0, handleSignals: false, logger: silent })
    const live = await open(running.url, '/double')
    live.ws.send(JSON.stringify({ n: 5 }))
    await until('an answer', () => live.messages.length === 1)
    const stopping = running.close()
    assert.equal((await live.closed).code, 1001)
    await stopping
  })
})
