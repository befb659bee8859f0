import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { isConnectionError, RedisLink, startedQueue } from '../../runners/index.js'
import { freePort } from '../utils/port.js'

// Which ioredis errors mean "the connection failed" (answered as a retryable 503
// E_REMOTE_UNAVAILABLE by the task routes) and which are the command's own. Real clients against
// a port nobody listens on, and the machine's Redis for a real command error.

const REDIS = 'redis://127.0.0.1:6379'

describe('isConnectionError', () => {
  it('is true for what ioredis throws when the connection is down: not writable, out of retries', async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`
    const link = new RedisLink(dead)
    const failFast = link.connection(false)
    const notWritable = await failFast.get('k').then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.ok(isConnectionError(notWritable), `not writable: ${String(notWritable)}`)
    // Queued while reconnecting, then given up: MaxRetriesPerRequestError.
    const queued = new Redis(dead, { maxRetriesPerRequest: 1, retryStrategy: () => 10, lazyConnect: false })
    queued.on('error', () => undefined)
    const outOfRetries = await queued.get('k').then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.equal((outOfRetries as Error).name, 'MaxRetriesPerRequestError')
    assert.ok(isConnectionError(outOfRetries))
    queued.disconnect()
    await link.close()
  })

  it("is false for a command's own error and for anything else", async () => {
    const live = new Redis(REDIS, { maxRetriesPerRequest: 1 })
    const reply = await live.call('NO-SUCH-COMMAND').then(
      () => undefined,
      (e: unknown) => e,
    )
    live.disconnect()
    assert.ok(reply instanceof Error, 'Redis answered with an error')
    assert.equal(isConnectionError(reply), false)
    assert.equal(isConnectionError(new Error('boom')), false)
    assert.equal(isConnectionError(undefined), false)
  })
})

describe('startedQueue', () => {
  // A stand-in for a BullMQ queue: only whether its start failed matters here. The failure it
  // guards against (Redis dropping during the queue's own start) is timing-bound; see
  // test/framework/tasks.test.ts, "/readyz reflects the tasks' Redis", which hit it 1 run in ~30.
  const fake = (failed: boolean) => {
    const q = {
      closed: false,
      waitUntilReady: () => (failed ? Promise.reject(new Error('Connection is closed.')) : Promise.resolve()),
      close: async () => void (q.closed = true),
    }
    return q
  }

  it('keeps a queue that started', async () => {
    const q = fake(false)
    assert.equal(await startedQueue(q, () => assert.fail('must not open another')), q)
    assert.equal(q.closed, false)
  })

  it('replaces a queue whose start failed, closing the broken one', async () => {
    const broken = fake(true)
    const fresh = fake(false)
    assert.equal(await startedQueue(broken, () => fresh), fresh)
    assert.equal(broken.closed, true)
  })
})
