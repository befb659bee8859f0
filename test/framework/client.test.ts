import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { Greeter } from '../../examples/greeter/service.js'
import { z } from 'zod'
import {
  BundleError,
  createClient,
  defineApi,
  defineService,
  definitionOf,
  io,
  serve,
  type RunningServer,
} from '../../framework/index.js'
import { until } from '../utils/until.js'

describe('typed client against a real server', () => {
  let server: RunningServer
  before(async () => {
    server = await serve(definitionOf(Greeter)!, {
      port: 0,
      handleSignals: false,
      logger: pino({ level: 'silent' }),
      apiKey: 'k',
    })
  })
  after(() => server.close())

  it('calls APIs with typed inputs and outputs', async () => {
    const client = createClient<typeof Greeter>(server.url, { apiKey: 'k' })
    const out = await client.greet({ name: 'ada' })
    const greeting: string = out.greeting
    assert.equal(greeting, 'hello ada!')
    assert.equal(await client.shout('quiet'), 'QUIET')
    // @ts-expect-error name must be a string
    await assert.rejects(client.greet({ name: 42 }), (err: BundleError) => err.code === 'E_INPUT_INVALID')
  })

  it('throws a BundleError carrying the server code', async () => {
    const noKey = createClient<typeof Greeter>(server.url)
    await assert.rejects(
      noKey.greet({ name: 'ada' }),
      (err: unknown) => err instanceof BundleError && err.code === 'E_HTTP_UNAUTHORIZED' && err.status === 401,
    )
  })
})

describe('typed client: shed calls are retried after Retry-After', () => {
  let server: RunningServer
  let runs = 0
  const Nap = z.object({ ms: z.number() })
  const def = defineService({
    name: 'one-at-a-time',
    traffic: { maxConcurrency: 1, timeoutMs: 10_000 },
    apis: {
      nap: defineApi({
        input: io.json(Nap),
        output: io.json(Nap),
        handler: async ({ ms }) => {
          runs++
          await new Promise((r) => setTimeout(r, ms))
          return { ms }
        },
      }),
    },
  })
  before(async () => {
    server = await serve(def, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }) })
  })
  after(() => server.close())
  type Nap = { nap(input: { ms: number }): Promise<{ ms: number }> }
  const napper = class {} as unknown as abstract new () => Nap

  it('the server answers 429 with Retry-After: 1 over its concurrency limit', async () => {
    const ran = runs
    const first = fetch(`${server.url}/nap`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ms: 1_000 }),
    })
    await until('the first call to run', () => runs > ran)
    const second = await fetch(`${server.url}/nap`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ms: 300 }),
    })
    assert.equal(second.status, 429)
    assert.equal(second.headers.get('retry-after'), '1')
    assert.equal(((await second.json()) as { error: { code: string } }).error.code, 'E_HTTP_TOO_MANY_REQUESTS')
    assert.equal((await first).status, 200)
  })

  it(
    'three calls at once on a server that takes one: all ' + 'succeed after backing off; with retries: 0 two fail',
    async () => {
      runs = 0
      const client = createClient<typeof napper>(server.url)
      const started = Date.now()
      const out = await Promise.all([1, 2, 3].map(() => client.nap({ ms: 200 })))
      assert.deepEqual(out, [{ ms: 200 }, { ms: 200 }, { ms: 200 }])
      assert.equal(runs, 3, 'each call ran once: a refused call had not run')
      assert.ok(
        Date.now() - started >= 400,
        'the retries waited (Retry-After, jittered) instead of hammering the server',
      )

      const eager = createClient<typeof napper>(server.url, { retries: 0 })
      const settled = await Promise.allSettled([1, 2, 3].map(() => eager.nap({ ms: 200 })))
      const refused = settled
        .filter((s) => s.status === 'rejected')
        .map((s) => ((s as PromiseRejectedResult).reason as BundleError).code)
      assert.deepEqual(refused, ['E_HTTP_TOO_MANY_REQUESTS', 'E_HTTP_TOO_MANY_REQUESTS'])
    },
  )

  it('an abort during the back-off ends the call at once', async () => {
    const client = createClient<typeof napper>(server.url, { retries: 5 })
    const ran = runs
    const busy = client.nap({ ms: 1500 })
    await until('the busy call to run', () => runs > ran)
    const ac = new AbortController()
    const waiting = client.nap({ ms: 10 }, { signal: ac.signal })
    setTimeout(() => ac.abort(new Error('gave up')), 200)
    const t = Date.now()
    await assert.rejects(waiting, /gave up/)
    assert.ok(Date.now() - t < 1000, 'aborted in the back-off, not after it')
    await busy
  })
})
