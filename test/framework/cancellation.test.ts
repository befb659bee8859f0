import assert from 'node:assert/strict'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { type ClientRequest, request } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { customRunner, defineApi, defineService, io, serve, type RunningServer } from '../../framework/index.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

// Request cancellation (Triton's): a request whose client has gone before its batch runs is
// dropped from the queue and never run, and counted. A runner with one worker and one request a
// batch holds the queue with a batch that waits for the test's go-ahead (a file); its worker logs
// every batch it really started and ran.

describe('a request whose client has gone is never run', () => {
  const dir = tempDir()
  const log = join(dir, 'ran.log')
  const startLog = join(dir, 'started.log')
  const lines = (file: string): string[] =>
    existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []
  /** Batches the worker finished, and started. */
  const ran = () => lines(log)
  const started = () => lines(startLog)
  let running: RunningServer
  const sleepy = customRunner(
    { module: new URL('../fixtures/echo-runner.ts', import.meta.url), export: 'EchoRunner' },
    {
      name: 'sleepy',
      batchesPerWorker: 1,
      methods: { sleepy: { batchable: true, maxBatchSize: 1, maxDelayMs: 0, deadlineMs: 30_000 } },
    },
  )
  const queued = () => sleepy.queueDepth().sleepy ?? 0
  const Job = z.object({ id: z.string(), ms: z.number().int().min(0).max(5_000), hold: z.string().optional() })
  const def = defineService({
    name: 'cancel',
    traffic: { timeoutMs: 30_000, maxConcurrency: 16 },
    runners: [sleepy],
    apis: {
      sleep: defineApi({
        input: io.json(Job),
        output: io.json(z.object({ ran: z.string() })),
        handler: async (job) => {
          await sleepy.batch('sleepy', [job])
          return { ran: job.id }
        },
      }),
      ticks: defineApi({
        input: io.json(z.object({ id: z.string(), n: z.number().int() })),
        output: io.stream(io.json(z.object({ i: z.number() }))),
        handler: async function* ({ id, n }) {
          for (let i = 0; i < n; i++) {
            await sleepy.batch('sleepy', [{ id: `${id}-${i}`, ms: 50 }])
            yield { i }
          }
        },
      }),
    },
  })

  before(async () => {
    process.env.ECHO_LOG = log
    process.env.ECHO_START_LOG = startLog
    running = await serve(def, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }) })
  })
  after(async () => {
    await running.close()
    delete process.env.ECHO_LOG
    delete process.env.ECHO_START_LOG
  })

  /** A request on its own connection, to hang up on; resolves with its answer if it gets one. */
  function send(path: string, body: unknown): { req: ClientRequest; answer: Promise<string> } {
    let req!: ClientRequest
    const answer = new Promise<string>((resolve, reject) => {
      req = request(
        `${running.url}${path}`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false },
        (res) => {
          let text = ''
          res.on('data', (c) => (text += c))
          res.on('end', () => resolve(text))
          res.on('error', reject)
        },
      )
      req.on('error', reject)
      req.end(JSON.stringify(body))
    })
    answer.catch(() => undefined)
    return { req, answer }
  }

  const openConnections = async (): Promise<number> => {
    const text = await (await fetch(`${running.url}/metrics`, { headers: { connection: 'close' } })).text()
    // Less this scrape's own connection.
    return Number(/^bundle_http_connections_open\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? Number.NaN) - 1
  }

  const cancelled = async (): Promise<number> => {
    const text = await (await fetch(`${running.url}/metrics`)).text()
    return Number(/^bundle_runner_cancelled_total\{[^}]*runner="sleepy"[^}]*\} (\S+)$/m.exec(text)?.[1] ?? Number.NaN)
  }

  it('drops queued requests whose clients hung up, runs the rest, and counts them', async () => {
    const before = await cancelled()
    const release = join(dir, 'release-A')
    const a = send('/sleep', { id: 'A', ms: 0, hold: release })
    await until('A is running', () => started().includes('A'))
    const b = send('/sleep', { id: 'B', ms: 10 })
    const c = send('/sleep', { id: 'C', ms: 10 })
    const d = send('/sleep', { id: 'D', ms: 10 })
    await until('B, C and D are queued behind A', () => queued() === 3)
    b.req.destroy()
    c.req.destroy()
    // The server has seen B and C go (their connections closed) before A lets the queue move.
    await until('B and C disconnected', async () => (await openConnections()) === 2)
    writeFileSync(release, '')
    assert.deepEqual(JSON.parse(await a.answer), { ran: 'A' })
    assert.deepEqual(JSON.parse(await d.answer), { ran: 'D' })
    assert.deepEqual(ran(), ['A', 'D'])
    assert.deepEqual(started(), ['A', 'D'])
    assert.equal((await cancelled()) - before, 2)
  })

  it('a stream whose client goes leaves the queue at once, before its turn comes', async () => {
    const before = await cancelled()
    const release = join(dir, 'release-E')
    const a = send('/sleep', { id: 'E', ms: 0, hold: release })
    await until('E is running', () => started().includes('E'))
    const s = send('/ticks', { id: 'S', n: 3 })
    await until('the stream’s first call is queued behind E', () => queued() === 1)
    s.req.destroy()
    // Gone from the queue while E still runs: the signal removed it, not its turn.
    await until('the stream’s call left the queue', () => queued() === 0)
    assert.ok(!ran().includes('E'), 'E was still running')
    writeFileSync(release, '')
    assert.deepEqual(JSON.parse(await a.answer), { ran: 'E' })
    assert.ok(!started().some((id) => id.startsWith('S-')), `started: ${started().join(',')}`)
    assert.equal((await cancelled()) - before, 1)
  })
})
