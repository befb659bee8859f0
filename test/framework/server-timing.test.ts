import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { createServiceApp, customRunner, defineApi, defineService, io, type ServiceApp } from '../../framework/index.js'

// BUNDLE_SERVER_TIMING / serverTiming: each API answer says where its time went, the runner's
// queue, transfer and compute given apart. A real worker sleeps a known time per batch.

const parse = (h: string | null): Record<string, number> =>
  Object.fromEntries(
    (h ?? '')
      .split(', ')
      .filter(Boolean)
      .map((p) => {
        const [name, dur] = p.split(';dur=')
        return [name!, Number(dur)]
      }),
  )

describe('Server-Timing', () => {
  let on: ServiceApp
  let off: ServiceApp
  before(async () => {
    const make = (serverTiming: boolean) => {
      const sleepy = customRunner(
        { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
        { name: 'sleepy', methods: { sleepy: { batchable: true, maxBatchSize: 4, maxDelayMs: 0 } } },
      )
      const def = defineService({
        name: 'timing',
        runners: [sleepy],
        apis: {
          nap: defineApi({
            input: io.json(z.object({ ms: z.number() })),
            output: io.json(z.object({ id: z.string() })),
            handler: async ({ ms }) => ({
              id: (await sleepy.batch<{ id: string; ms: number }, string>('sleepy', [{ id: 'a', ms }]))[0]!,
            }),
          }),
          plain: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }),
        },
      })
      return createServiceApp(def, { logger: pino({ level: 'silent' }), serverTiming })
    }
    on = make(true)
    off = make(false)
    await Promise.all([on.start(), off.start()])
  })
  after(async () => {
    await Promise.all([on.stop(), off.stop()])
  })

  const nap = (svc: ServiceApp, ms: number) =>
    svc.app.request('/nap', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ms }),
    })

  it('splits a runner call into queue, transfer and compute, inside the method, inside the total', {
    timeout: 60_000,
  }, async () => {
    const r = await nap(on, 60)
    assert.equal(r.status, 200)
    const t = parse(r.headers.get('server-timing'))
    assert.deepEqual(Object.keys(t), ['read', 'decode', 'method', 'queue', 'transfer', 'compute', 'encode', 'total'])
    for (const [k, v] of Object.entries(t)) assert.ok(Number.isFinite(v) && v >= 0, `${k}=${v}`)
    // The worker slept 60 ms: its compute says so (timers may fire late, never early).
    assert.ok(t.compute! >= 59, `compute ${t.compute}`)
    // The method waited for the queue, the way there and back and the compute.
    assert.ok(t.method! + 0.5 >= t.queue! + t.transfer! + t.compute!, JSON.stringify(t))
    assert.ok(t.total! + 0.01 >= t.read! + t.decode! + t.method! + t.encode!, JSON.stringify(t))
  })

  it('APIs without runners get the HTTP stages; without the option there is no header', async () => {
    const plain = await on.app.request('/plain', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    })
    assert.deepEqual(Object.keys(parse(plain.headers.get('server-timing'))), [
      'read',
      'decode',
      'method',
      'encode',
      'total',
    ])
    const quiet = await nap(off, 1)
    assert.equal(quiet.status, 200)
    assert.equal(quiet.headers.get('server-timing'), null)
  })
})
