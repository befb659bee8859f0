import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { Greeter } from '../../examples/greeter/service.js'
import { BundleError, createClient, definitionOf, serve, type RunningServer } from '../../framework/index.js'

describe('typed client against a real server', () => {
  let server: RunningServer
  before(async () => {
    server = await serve(definitionOf(Greeter)!, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }), apiKey: 'k' })
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
    await assert.rejects(noKey.greet({ name: 'ada' }), (err: unknown) => err instanceof BundleError && err.code === 'E_HTTP_UNAUTHORIZED' && err.status === 401)
  })
})
