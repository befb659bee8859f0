import assert from 'node:assert/strict'
import { request } from 'node:http'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { serveReady, type Served } from '../utils/serve.js'

// Shutdown under a load that opens a new connection per request (as many load balancers and
// clients without keep-alive do). With the default settings, clients that honour the 503's
// Retry-After see at most one reset (one that connects in the very instant the listener closes,
// from the kernel's listen backlog); with a drain delay and clients that stop sending on a 503
// (a balancer moving to another replica), none. A client that resends the instant it is refused
// can still land in the backlog as the listener closes: that is what --drain-delay is for.

const GREETER = fileURLToPath(new URL('../../examples/greeter/service.ts', import.meta.url))

interface Tally {
  ok: number
  refusedAfterStop: number // 503 while draining, each with Connection: close and Retry-After
  resets: number
  connectRefused: number
  other: string[]
}

type Outcome = { status: number; close: boolean; retryAfter: number | undefined } | { error: string }

function once(url: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/greet`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', connection: 'close' } },
      (res) => {
        res.resume()
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            close: res.headers.connection === 'close',
            retryAfter: res.headers['retry-after'] === undefined ? undefined : Number(res.headers['retry-after']),
          }),
        )
        res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }))
      },
    )
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }))
    req.end(JSON.stringify({ name: 'ada' }))
  })
}

/**
 * `loops` clients, each sending one request per connection, back to back, until the server
 * refuses connections. On a 503 a client waits as its Retry-After says (`on503: 'wait'`) or
 * leaves (`'leave'`). SIGTERM once `before` answers came.
 */
async function shutDownUnderLoad(
  s: Served,
  loops: number,
  before: number,
  on503: 'wait' | 'leave' | 'resend',
): Promise<Tally> {
  const t: Tally = { ok: 0, refusedAfterStop: 0, resets: 0, connectRefused: 0, other: [] }
  let signalled = false
  const client = async (): Promise<void> => {
    for (;;) {
      const o = await once(s.url)
      if ('error' in o) {
        if (o.error === 'ECONNREFUSED') return void t.connectRefused++
        if (o.error === 'ECONNRESET' || o.error === 'socket hang up' || o.error === 'EPIPE') t.resets++
        else t.other.push(o.error)
        if (t.resets + t.other.length > 50) return
        continue
      }
      if (o.status === 200) t.ok++
      else if (o.status === 503 && o.close && o.retryAfter !== undefined && o.retryAfter > 0) {
        t.refusedAfterStop++
        if (on503 === 'leave') return
        if (on503 === 'wait') await new Promise((r) => setTimeout(r, o.retryAfter! * 1000))
      } else t.other.push(`HTTP ${o.status} close=${o.close} retry-after=${o.retryAfter}`)
      if (!signalled && t.ok >= before) {
        signalled = true
        process.kill(s.pid, 'SIGTERM')
      }
    }
  }
  await Promise.all(Array.from({ length: loops }, client))
  return t
}

describe('shutdown under a new-connection-per-request load', () => {
  it('default settings: every request answered 200 or 503 (Connection: close, Retry-After), at most one reset', {
    timeout: 120_000,
  }, async () => {
    const s = await serveReady(GREETER)
    try {
      const t = await shutDownUnderLoad(s, 8, 300, 'wait')
      assert.deepEqual(t.other, [], JSON.stringify(t))
      assert.ok(t.ok >= 300, JSON.stringify(t))
      assert.ok(t.resets <= 1, `resets: ${JSON.stringify(t)}`)
      assert.ok(t.connectRefused === 8, `every client ends refused once the listener is closed: ${JSON.stringify(t)}`)
    } finally {
      await s.stop('SIGTERM')
    }
  })

  it('default settings, clients that resend at once: no hang, no error but 503, resets only from the backlog', {
    timeout: 120_000,
  }, async (c) => {
    const s = await serveReady(GREETER)
    try {
      const t = await shutDownUnderLoad(s, 8, 300, 'resend')
      assert.deepEqual(t.other, [], JSON.stringify(t))
      assert.equal(t.connectRefused, 8, `every client ends, refused: ${JSON.stringify(t)}`)
      // At most what 8 clients can have waiting in the listen backlog at once.
      assert.ok(t.resets <= 8, JSON.stringify(t))
      c.diagnostic(`resend-at-once clients, default settings: ${JSON.stringify(t)}`)
    } finally {
      await s.stop('SIGTERM')
    }
  })

  it('--drain-delay 1000: /readyz drops, new requests get 503 until clients leave, no reset', {
    timeout: 120_000,
  }, async () => {
    const s = await serveReady(GREETER, ['--drain-delay', '1000'])
    try {
      const t = await shutDownUnderLoad(s, 8, 300, 'leave')
      assert.deepEqual(t.other, [], JSON.stringify(t))
      assert.equal(t.resets, 0, JSON.stringify(t))
      assert.equal(t.connectRefused, 0, `the listener stayed open while clients left: ${JSON.stringify(t)}`)
      assert.equal(t.refusedAfterStop, 8, `each client was told 503 once: ${JSON.stringify(t)}`)
    } finally {
      await s.stop('SIGTERM')
    }
  })

  it('a bad --drain-delay is a usage error before anything listens', { timeout: 60_000 }, async () => {
    await assert.rejects(serveReady(GREETER, ['--drain-delay', 'soon']), /--drain-delay "soon" must be a whole number/)
  })
})
