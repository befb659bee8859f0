import assert from 'node:assert/strict'
import { request } from 'node:http'
import { connect } from 'node:net'
import { Writable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { defineApi, defineService, io, serve, type RunningServer } from '../../framework/index.js'

// serve() answers API routes straight from node's HTTP server (no web Request/Response); these
// check that it answers them exactly as the hono app does (app.request()), over a real socket.
const def = defineService({
  name: 'fast',
  apis: {
    greet: defineApi({
      input: io.json(z.object({ name: z.string().min(1) })),
      output: io.json(z.object({ greeting: z.string() })),
      handler: async ({ name }) => ({ greeting: `hello ${name}` }),
    }),
    shout: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t.toUpperCase() }),
  },
})

interface Reply {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

function send(
  url: string,
  path: string,
  o: { method?: string; headers?: Record<string, string>; body?: string | Buffer; chunked?: boolean } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      { method: o.method ?? 'POST', headers: o.headers ?? {}, agent: false },
      (res) => {
        let body = ''
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
      },
    )
    req.on('error', reject)
    if (o.chunked && o.body !== undefined) {
      // No Content-Length: the body arrives in pieces and is cut off past the limit.
      const b = Buffer.from(o.body)
      for (let i = 0; i < b.length; i += 1024) req.write(b.subarray(i, i + 1024))
      req.end()
    } else req.end(o.body)
  })
}

describe('API routes on a socket (serve()’s fast path) answer as the hono app does', () => {
  let running: RunningServer
  let keyed: RunningServer
  const lines: string[] = []
  let onLine: (() => void) | undefined
  const logger = pino(
    { level: 'info' },
    new Writable({ write: (c, _e, cb) => (lines.push(String(c)), onLine?.(), cb()) }),
  )
  /** Resolves once a logged line matches `re`. */
  const logged = (re: RegExp) =>
    new Promise<void>((resolve) => {
      onLine = () => lines.some((l) => re.test(l)) && resolve()
      onLine()
    })
  before(async () => {
    running = await serve(def, { port: 0, handleSignals: false, logger, maxBodyBytes: 4096 })
    keyed = await serve(def, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }), apiKey: 'sesame' })
  })
  after(async () => {
    await running.close()
    await keyed.close()
  })

  it('200 with a length, the request id echoed or made, one access line each; the same bytes as app.request()', {
    timeout: 30_000,
  }, async () => {
    const json = { 'content-type': 'application/json' }
    const ok = await send(running.url, '/greet', {
      headers: { ...json, 'x-request-id': 'abc-1' },
      body: '{"name":"ada"}',
    })
    assert.deepEqual(
      [ok.status, ok.body, ok.headers['x-request-id'], ok.headers['content-length'], ok.headers['content-type']],
      [200, '{"greeting":"hello ada"}', 'abc-1', '24', 'application/json'],
    )
    assert.equal(ok.headers['transfer-encoding'], undefined)
    const fresh = await send(running.url, '/greet?trace=1', { headers: json, body: '{"name":"bo"}' })
    assert.equal(fresh.status, 200, 'a query string does not change the route')
    assert.match(String(fresh.headers['x-request-id']), /^[0-9a-f-]{36}$/)
    const viaHono = await running.service.app.request('/greet', {
      method: 'POST',
      headers: json,
      body: '{"name":"ada"}',
    })
    assert.equal(await viaHono.text(), ok.body)
    const text = await send(running.url, '/shout', {
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: 'ünï',
    })
    assert.deepEqual([text.status, text.body], [200, 'ÜNÏ'])
    // The access line is written after the answer: wait for it.
    await logged(/"method":"POST","path":"\/greet","status":200,.*"requestId":"abc-1"/)
  })

  it(
    'errors: 400 with details, 415, 413 by Content-Length and mid-stream, 405 for GET — coded JSON bodies as ' +
      'everywhere',
    async () => {
      const bad = await send(running.url, '/greet', {
        headers: { 'content-type': 'application/json' },
        body: '{"name":""}',
      })
      assert.equal(bad.status, 400)
      assert.equal(JSON.parse(bad.body).error.code, 'E_INPUT_INVALID')
      const viaHono = await running.service.app.request('/greet', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"name":""}',
      })
      assert.deepEqual(
        { ...JSON.parse(bad.body).error, requestId: 0 },
        { ...((await viaHono.json()) as { error: object }).error, requestId: 0 },
      )
      const media = await send(running.url, '/greet', { headers: { 'content-type': 'text/csv' }, body: 'a,b' })
      assert.deepEqual([media.status, JSON.parse(media.body).error.code], [415, 'E_HTTP_UNSUPPORTED_MEDIA_TYPE'])
      const big = 'x'.repeat(10_000)
      const declared = await send(running.url, '/shout', { headers: { 'content-type': 'text/plain' }, body: big })
      assert.deepEqual(
        [declared.status, JSON.parse(declared.body).error.code, declared.headers.connection],
        [413, 'E_HTTP_PAYLOAD_TOO_LARGE', 'close'],
      )
      const streamed = await send(running.url, '/shout', {
        headers: { 'content-type': 'text/plain' },
        body: big,
        chunked: true,
      })
      // Answered as soon as the limit passes, while the client is still writing: the close lingers, so the
      // client reads the 413 rather than a reset.
      assert.deepEqual([streamed.status, JSON.parse(streamed.body).error.code], [413, 'E_HTTP_PAYLOAD_TOO_LARGE'])
      const get = await send(running.url, '/greet', { method: 'GET' })
      assert.deepEqual([get.status, get.headers.allow], [405, 'POST'])
      // The server still serves after all that.
      assert.equal(
        (await send(running.url, '/shout', { headers: { 'content-type': 'text/plain' }, body: 'ok' })).body,
        'OK',
      )
    },
  )

  it(
    'an error answered before the body has all arrived ' + 'closes the connection instead of reading the rest',
    async () => {
      const r = await new Promise<Reply>((resolve, reject) => {
        // Content-Length promises 1 MiB; only 1 KiB is sent before the answer comes.
        const req = request(
          `${running.url}/greet`,
          { method: 'POST', headers: { 'content-type': 'text/csv', 'content-length': String(1 << 20) }, agent: false },
          (res) => {
            let body = ''
            res.on('data', (c) => (body += c))
            res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
          },
        )
        req.on('error', reject)
        req.write(Buffer.alloc(1024, 97))
      })
      assert.deepEqual(
        [r.status, JSON.parse(r.body).error.code, r.headers.connection],
        [415, 'E_HTTP_UNSUPPORTED_MEDIA_TYPE', 'close'],
      )
    },
  )

  it(
    'a client that goes on writing its body after an early answer is not reset: the rest is read and dropped, ' +
      'then the connection closes',
    async () => {
      const port = Number(new URL(running.url).port)
      const outcome = await new Promise<{ answer: string; error?: string }>((resolve) => {
        // Half-open allowed: the client keeps writing after the server's FIN, as a client busy with its body does.
        const sock = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
        let answer = ''
        let error: string | undefined
        sock.on('data', (d) => (answer += d))
        sock.on('error', (e: NodeJS.ErrnoException) => (error = e.code))
        sock.on('close', () => resolve({ answer, error }))
        // The server's FIN after its answer: only now does the client send the rest of its body, and then close.
        sock.on('end', () => {
          // In pieces, a little apart, as a client streaming a file: a reset shows on the next write.
          const piece = Buffer.alloc(64 * 1024, 97)
          let left = 16
          const more = (): void => {
            if (sock.destroyed) return
            if (--left === 0) return void sock.end()
            sock.write(piece, () => setTimeout(more, 5))
          }
          more()
        })
        sock.write(
          `POST /greet HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\nContent-Length: ${1 << 20}\r\n\r\n` +
            'a'.repeat(1024),
        )
      })
      assert.match(outcome.answer, /^HTTP\/1\.1 415 [\s\S]*connection: close[\s\S]*E_HTTP_UNSUPPORTED_MEDIA_TYPE/i)
      assert.equal(outcome.error, undefined, 'no reset while the client finished writing')
    },
  )

  it('the API key is checked: 401 with WWW-Authenticate without it, 200 with it', async () => {
    const no = await send(keyed.url, '/greet', {
      headers: { 'content-type': 'application/json' },
      body: '{"name":"ada"}',
    })
    assert.deepEqual(
      [no.status, JSON.parse(no.body).error.code, no.headers['www-authenticate']],
      [401, 'E_HTTP_UNAUTHORIZED', 'Bearer'],
    )
    const yes = await send(keyed.url, '/greet', {
      headers: { 'content-type': 'application/json', authorization: 'Bearer sesame' },
      body: '{"name":"ada"}',
    })
    assert.equal(yes.status, 200)
    const metrics = await (await fetch(`${keyed.url}/metrics`)).text()
    assert.match(metrics, /bundle_request_total\{service="fast",endpoint="greet",status="401"\} 1/)
    assert.match(metrics, /bundle_request_total\{service="fast",endpoint="greet",status="200"\} 1/)
  })

  it('while draining: 503 E_HTTP_NOT_READY with Connection: close', async () => {
    running.service.drain()
    const r = await send(running.url, '/greet', {
      headers: { 'content-type': 'application/json' },
      body: '{"name":"ada"}',
    })
    assert.deepEqual(
      [r.status, JSON.parse(r.body).error.code, r.headers.connection],
      [503, 'E_HTTP_NOT_READY', 'close'],
    )
  })
})
