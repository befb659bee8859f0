import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, customRunner, defineApi, defineService, io, type ServiceApp } from '../../framework/index.js'
import { tempDir } from '../utils/tmp.js'

// A request's deadline and priority reach the runner calls its API makes, through the server:
// `Request-Timeout` shortens the runner's deadline, `Request-Priority` (or the API's own
// priority) orders batches, a request that cannot make it is refused without running, and a
// refusal that comes early does not read the body. A real runner worker logs what it ran.

const Item = z.object({ id: z.string(), ms: z.number().int().min(0).max(5_000) })

describe('deadlines and priorities through the server', () => {
  const dir = tempDir()
  const log = join(dir, 'ran.log')
  let svc: ServiceApp
  let calls = 0
  const ran = (): string[] =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .trim()
          .split('\n')
          .flatMap((l) => l.split(','))
          .filter(Boolean)
      : []
  const batches = (): string[][] =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => l.split(','))
      : []

  before(async () => {
    process.env.ECHO_LOG = log
    const sleepy = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      {
        name: 'sleepy',
        batchesPerWorker: 1,
        methods: { sleepy: { batchable: true, maxBatchSize: 8, maxDelayMs: 0, deadlineMs: 5_000 } },
      },
    )
    // A runner of its own, whose batches always take 200 ms: its batcher learns exactly that.
    const steady = customRunner(
      { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
      {
        name: 'steady',
        batchesPerWorker: 1,
        methods: { sleepy: { batchable: true, maxBatchSize: 8, maxDelayMs: 0, deadlineMs: 5_000 } },
      },
    )
    const through = (r: typeof sleepy) => async (item: z.infer<typeof Item>) => {
      calls++
      const [id] = await r.batch<z.infer<typeof Item>, string>('sleepy', [item])
      return { id: id! }
    }
    const run = through(sleepy)
    const def = defineService({
      name: 'deadlines',
      runners: [sleepy, steady],
      apis: {
        work: defineApi({ input: io.json(Item), output: io.json(z.object({ id: z.string() })), handler: run }),
        urgent: defineApi({
          input: io.json(Item),
          output: io.json(z.object({ id: z.string() })),
          priority: 'high',
          handler: run,
        }),
        steady: defineApi({
          input: io.json(Item),
          output: io.json(z.object({ id: z.string() })),
          handler: through(steady),
        }),
      },
    })
    svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
    await svc.start()
  })
  after(async () => {
    await svc.stop()
    delete process.env.ECHO_LOG
  })

  const post = (path: string, item: z.infer<typeof Item>, headers: Record<string, string> = {}) =>
    svc.app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(item),
    })
  /**
   * Sends `item` and resolves once its API method has run far enough to hand it to the runner (an idle batcher
   * dispatches at once).
   */
  const occupy = async (path: string, item: z.infer<typeof Item>) => {
    const seen = calls + 1
    const answer = post(path, item)
    while (calls < seen) await new Promise((r) => setImmediate(r))
    return { answer }
  }

  it('Request-Timeout shortens the deadline: behind 400 ms of work a 100 ms caller is refused (503, Retry-After) ' +
    'and never run; a patient one is served', {
    timeout: 60_000,
  }, async () => {
    // Teach the batcher the runner's speed, then occupy it.
    for (let i = 0; i < 4; i++) assert.equal((await post('/work', { id: `warm${i}`, ms: 100 })).status, 200)
    const { answer: busy } = await occupy('/work', { id: 'busy', ms: 400 })
    const hurried = await post('/work', { id: 'hurried', ms: 100 }, { 'request-timeout': '100' })
    assert.equal(hurried.status, 503)
    assert.equal(hurried.headers.get('retry-after'), '1')
    assert.equal(((await hurried.json()) as { error: { code: string } }).error.code, 'E_RUNNER_OVERLOADED')
    const patient = await post('/work', { id: 'patient', ms: 10 }, { 'request-timeout': '5000' })
    assert.equal(patient.status, 200)
    assert.equal((await busy).status, 200)
    assert.ok(ran().includes('patient'))
    assert.equal(ran().includes('hurried'), false, 'a refused request never runs')
  })

  it('a bad Request-Timeout or Request-Priority is a 400 that names the header', async () => {
    for (const [header, value] of [
      ['request-timeout', 'soon'],
      ['request-timeout', '-5'],
      ['request-priority', 'urgent'],
      ['request-priority', '1.5'],
    ] as const) {
      const r = await post('/work', { id: 'x', ms: 0 }, { [header]: value })
      assert.equal(r.status, 400, `${header}: ${value}`)
      const body = (await r.json()) as { error: { code: string; message: string } }
      assert.equal(body.error.code, 'E_INPUT_INVALID')
      assert.match(
        body.error.message,
        new RegExp(header.replace('request-', 'Request-').replace('-t', '-T').replace('-p', '-P')),
      )
    }
  })

  it('more urgent requests are batched first: the API option and the Request-Priority header', {
    timeout: 60_000,
  }, async () => {
    const before = batches().length
    const { answer: hold } = await occupy('/work', { id: 'hold', ms: 300 })
    const queued = [
      post('/work', { id: 'low1', ms: 1 }, { 'request-priority': 'low' }),
      post('/work', { id: 'low2', ms: 1 }, { 'request-priority': '9' }),
      post('/work', { id: 'normal', ms: 1 }),
      post('/urgent', { id: 'api-high', ms: 1 }), // the API's own priority: high
      post('/work', { id: 'header-high', ms: 1 }, { 'request-priority': '1' }),
    ]
    for (const r of [hold, ...queued]) assert.equal((await r).status, 200)
    const order = batches().slice(before).flat()
    assert.equal(order[0], 'hold')
    assert.deepEqual(order.slice(1, 3).sort(), ['api-high', 'header-high'], `the two urgent ones go first: ${order}`)
    assert.equal(order[3], 'normal')
    assert.deepEqual(order.slice(4).sort(), ['low1', 'low2'])
  })

  it('once the server knows an API calls a runner, a request that runner would refuse is refused before its body ' +
    'is read', {
    timeout: 60_000,
  }, async () => {
    for (let i = 0; i < 3; i++) assert.equal((await post('/steady', { id: `s${i}`, ms: 200 })).status, 200)
    const { answer: busy } = await occupy('/steady', { id: 'busy2', ms: 200 })
    const before = calls
    // A body that would fail validation: refused as overloaded, not as invalid, so it was never read.
    const r = await svc.app.request('/steady', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'request-timeout': '50' },
      body: '{"not": "an item"}',
    })
    assert.equal(r.status, 503)
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'E_RUNNER_OVERLOADED')
    assert.equal(calls, before, 'the API method never ran')
    assert.equal((await busy).status, 200)
  })
})
