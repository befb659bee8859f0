import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import { BundleError } from '../../errors/index.js'
import {
  createClient,
  createServiceApp,
  defineApi,
  defineService,
  io,
  serve,
  type RunningServer,
} from '../../framework/index.js'
import { until } from '../utils/until.js'

// Streaming answers (io.stream): Server-Sent Events or NDJSON, items as they are yielded, the
// generator stopped when the client goes, over app.request() and over a real socket.

const Item = z.object({ n: z.number().int(), word: z.string() })

/** Opens one gate per test: the generator waits on it after its first item. */
let gate: { open: () => void; wait: Promise<void> } = newGate()
function newGate() {
  let open: () => void = () => undefined
  const wait = new Promise<void>((r) => (open = r))
  return { open, wait }
}
let lateItems = 0
/** Set when a generator's `finally` ran. */
const finished: string[] = []

const def = defineService({
  name: 'streams',
  traffic: { timeoutMs: 2_000, maxConcurrency: 8 },
  apis: {
    words: defineApi({
      input: io.json(z.object({ text: z.string(), hold: z.boolean().default(false) })),
      output: io.stream(io.json(Item)),
      handler: async function* ({ text, hold }) {
        try {
          let n = 0
          for (const word of text.split(' ')) {
            yield { n: n++, word }
            if (hold && n === 1) await gate.wait
          }
        } finally {
          finished.push(text)
        }
      },
    }),
    /** Runs until the client goes: a tick every 10 ms. */
    forever: defineApi({
      input: io.json(z.object({ id: z.string() })),
      output: io.stream(io.text()),
      handler: async function* ({ id }) {
        try {
          for (let i = 0; ; i++) {
            yield `tick ${i}`
            await new Promise((r) => setTimeout(r, 10))
          }
        } finally {
          finished.push(id)
        }
      },
    }),
    failing: defineApi({
      input: io.json(z.object({})),
      output: io.stream(io.json(Item)),
      handler: async function* () {
        yield { n: 0, word: 'first' }
        throw new BundleError('E_INPUT_INVALID', 'the second item cannot be made')
      },
    }),
    badItem: defineApi({
      input: io.json(z.object({})),
      output: io.stream(io.json(Item)),
      // Typed as an Item stream; the second item breaks the schema at run time.
      handler: async function* () {
        yield { n: 0, word: 'ok' }
        yield { n: 'one', word: 2 } as unknown as z.infer<typeof Item>
      },
    }),
    /** Returns its stream only once the server has seen its client go: a stream nobody will read. */
    late: defineApi({
      input: io.json(z.object({})),
      output: io.stream(io.json(Item)),
      handler: async (_input, ctx) => {
        await new Promise((r) => ctx.signal.addEventListener('abort', r, { once: true }))
        return (async function* () {
          for (let n = 0; ; n++) {
            lateItems++
            yield { n, word: 'again' }
            await new Promise((r) => setImmediate(r))
          }
        })()
      },
    }),
    silent: defineApi({
      input: io.json(z.object({})),
      output: io.stream(io.json(Item)),
      handler: async function* () {
        yield { n: 0, word: 'then nothing' }
        await new Promise((r) => setTimeout(r, 60_000).unref())
      },
    }),
  },
})

const post = (body: unknown, accept?: string) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(accept ? { accept } : {}) },
  body: JSON.stringify(body),
})

describe('io.stream answers (app.request)', () => {
  const svc = createServiceApp(def, { logger: pino({ level: 'silent' }) })
  before(() => svc.start())
  after(() => svc.stop())

  it('sends Server-Sent Events when the client accepts them: one data event per item, then end', async () => {
    const res = await svc.app.request('/words', post({ text: 'a b c' }, 'text/event-stream'))
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type')!, /^text\/event-stream/)
    assert.equal(res.headers.get('cache-control'), 'no-cache')
    const text = await res.text()
    assert.equal(
      text,
      'id: 0\ndata: {"n":0,"word":"a"}\n\nid: 1\ndata: {"n":1,"word":"b"}\n\nid: 2\ndata: {"n":2,"word":"c"}\n\n' +
        'event: end\ndata: {}\n\n',
    )
  })

  it('sends newline-delimited JSON otherwise', async () => {
    const res = await svc.app.request('/words', post({ text: 'x y' }))
    assert.equal(res.headers.get('content-type'), 'application/x-ndjson')
    assert.equal(await res.text(), '{"n":0,"word":"x"}\n{"n":1,"word":"y"}\n')
  })

  it('ends with an error event when the generator throws part way, or yields an item off its schema', async () => {
    const failing = await (await svc.app.request('/failing', post({}, 'text/event-stream'))).text()
    assert.match(failing, /data: \{"n":0,"word":"first"\}/)
    assert.match(
      failing,
      /event: error\ndata: \{"error":\{"code":"E_INPUT_INVALID","message":"the second item cannot be made"/,
    )
    assert.doesNotMatch(failing, /event: end/)
    const bad = await (await svc.app.request('/badItem', post({}))).text()
    const lines = bad
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    assert.deepEqual(lines[0], { n: 0, word: 'ok' })
    assert.equal(lines[1].error.code, 'E_OUTPUT_INVALID')
    assert.equal(lines.length, 2)
  })

  it('documents the stream in OpenAPI: both media types with the item schema', async () => {
    const doc = (await (await svc.app.request('/openapi.json')).json()) as any
    const content = doc.paths['/words'].post.responses['200'].content
    assert.deepEqual(Object.keys(content), ['text/event-stream', 'application/x-ndjson'])
    assert.deepEqual(content['text/event-stream'].itemSchema.required, ['n', 'word'])
    assert.equal(doc.paths['/forever'].post.responses['200'].content['application/x-ndjson'].itemSchema.type, 'string')
  })

  it('refuses a stream input without a stream output, streams in tasks, and other item kinds', () => {
    assert.throws(
      () =>
        defineService({
          name: 'bad',
          apis: {
            x: defineApi({
              input: io.stream(io.json(Item)),
              output: io.json(Item),
              handler: async () => ({ n: 1, word: '' }),
            }),
          },
        }),
      /a stream input makes a WebSocket route, whose output must be io.stream/,
    )
    assert.throws(
      () =>
        defineService({
          name: 'bad',
          apis: {
            x: defineApi({
              input: io.json(Item),
              output: io.stream(io.json(Item)),
              task: true,
              handler: async function* () {},
            }),
          },
        }),
      /neither can be io.stream/,
    )
    assert.throws(() => io.stream(io.image() as never), /io.json\(…\), io.text\(\) or io.bytes\(\) items/)
  })
})

describe('io.stream answers over a socket', () => {
  let running: RunningServer
  before(async () => {
    running = await serve(def, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }) })
  })
  after(() => running.close())

  it('sends the first item before the generator has finished', async () => {
    gate = newGate()
    const res = await fetch(
      `${running.url}/words`,
      post({ text: 'first second third', hold: true }, 'text/event-stream'),
    )
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
    let seen = ''
    while (!seen.includes('\n\n')) seen += (await reader.read()).value
    // The generator is still held at the gate: the first item came on its own.
    assert.match(seen, /"word":"first"/)
    assert.doesNotMatch(seen, /second/)
    assert.ok(!finished.includes('first second third'))
    gate.open()
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      seen += value
    }
    assert.match(seen, /"word":"third"[\s\S]*event: end/)
    assert.ok(finished.includes('first second third'))
  })

  it('stops the generator (its finally runs) when the client goes away', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = request(
        `${running.url}/forever`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false },
        (res) => {
          res.once('data', () => {
            // A few ticks arrived: hang up.
            req.destroy()
            resolve()
          })
        },
      )
      req.on('error', () => undefined)
      req.end(JSON.stringify({ id: 'gone-client' }))
      req.on('response', () => undefined)
      setTimeout(() => reject(new Error('no tick came')), 10_000).unref()
    })
    await until('the generator finished', () => finished.includes('gone-client'), 10_000)
    // The request no longer counts as in flight.
    await until('no request in flight', () => running.service.inFlight() === 0)
  })

  it('a client gone before the method returned its stream gets no stream run for it', async () => {
    lateItems = 0
    const req = request(`${running.url}/late`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      agent: false,
    })
    req.on('error', () => undefined)
    req.end('{}')
    await until('the method is running', () => running.service.inFlight() === 1)
    req.destroy()
    await until('the request ended', () => running.service.inFlight() === 0)
    assert.ok(lateItems <= 1, `${lateItems} items made for a client that had gone`)
  })

  it('ends a stream that sends nothing for the timeout with an E_HTTP_TIMEOUT event', async () => {
    const res = await fetch(`${running.url}/silent`, post({}, 'text/event-stream'))
    const text = await res.text()
    assert.match(text, /"word":"then nothing"/)
    assert.match(text, /event: error\ndata: \{"error":\{"code":"E_HTTP_TIMEOUT"/)
  })

  it('the typed client yields the items as an AsyncIterable, and stops the stream when the loop breaks', async () => {
    const client = createClient<{
      new (): {
        words(i: { text: string }): AsyncGenerator<z.infer<typeof Item>>
        forever(i: { id: string }): AsyncGenerator<string>
      }
    }>(running.url)
    const items: z.infer<typeof Item>[] = []
    for await (const item of await client.words({ text: 'one two three' })) items.push(item)
    assert.deepEqual(
      items.map((i) => i.word),
      ['one', 'two', 'three'],
    )
    let ticks = 0
    for await (const tick of await client.forever({ id: 'client-break' })) {
      assert.equal(tick, `tick ${ticks}`)
      if (++ticks === 3) break
    }
    await until('the generator finished after the loop broke', () => finished.includes('client-break'), 10_000)
    // A failure mid-stream is thrown as the server's coded error.
    await assert.rejects(
      async () => {
        for await (const _ of await (client as any).failing({})) {
          // the first item comes, then the error
        }
      },
      (err: BundleError) => err.code === 'E_INPUT_INVALID' && /cannot be made/.test(err.message),
    )
  })
})
