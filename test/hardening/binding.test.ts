import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { networkInterfaces } from 'node:os'
import { describe, it } from 'node:test'
import { type BundleError, defineApi, defineService, io, serve } from '../../framework/index.js'
import { BIN } from '../utils/cli.js'
import { freePort, until } from '../utils/remote.js'
import { silent } from './secure-service.js'

// A loopback bind by default (0.0.0.0 only when asked, as images do), and serve() options checked.

describe('binding', () => {
  const external = Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address

  const start = async (args: string[]) => {
    const port = await freePort()
    const env: NodeJS.ProcessEnv = { ...process.env, BUNDLE_ACCESS_LOG: '0' }
    delete env.HOST
    const child = spawn(
      process.execPath,
      [BIN, 'serve', 'examples/greeter/service.ts', '--port', String(port), ...args],
      { env, stdio: 'ignore' },
    )
    const exited = new Promise((r) => child.once('exit', r))
    await until(
      'server ready',
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
      60_000,
    )
    return { port, stop: async () => void (child.kill('SIGTERM'), await exited) }
  }
  const reach = (host: string, port: number) =>
    new Promise<string>((resolve) => {
      const s = connect(port, host, () => {
        s.destroy()
        resolve('connected')
      })
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'))
    })

  it('bundle serve binds 127.0.0.1 unless told otherwise; --host 0.0.0.0 opens it to the network', {
    timeout: 120_000,
  }, async (t) => {
    const local = await start([])
    try {
      assert.equal(await reach('127.0.0.1', local.port), 'connected')
      if (external === undefined) return t.skip('this machine has no non-loopback IPv4 address')
      assert.equal(await reach(external, local.port), 'ECONNREFUSED', `refused on ${external}`)
    } finally {
      await local.stop()
    }
    // The same check passes a server that does listen on all interfaces, so the refusal above is the bind's.
    const all = await start(['--host', '0.0.0.0'])
    try {
      assert.equal(await reach(external!, all.port), 'connected')
      assert.equal((await fetch(`http://${external}:${all.port}/livez`)).status, 200)
    } finally {
      await all.stop()
    }
  })

  it('images and Kubernetes set HOST=0.0.0.0, since a container is reached from outside', () => {
    assert.match(
      readFileSync(new URL('../../docker/Dockerfile.template', import.meta.url), 'utf8'),
      /\bHOST=0\.0\.0\.0\b/,
    )
    assert.match(
      readFileSync(new URL('../../builder/k8s.ts', import.meta.url), 'utf8'),
      /name: 'HOST', value: '0\.0\.0\.0'/,
    )
  })
})

describe('serve() options from code', () => {
  it(
    'refuse a zero, negative or non-number timeout with a ' + 'coded error instead of a server that drops every client',
    async () => {
      const def = defineService({
        name: 'opts',
        apis: { a: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }) },
      })
      for (const bad of [
        { sendTimeoutMs: 0 },
        { headersTimeoutMs: -1 },
        { keepAliveTimeoutMs: Number.NaN },
        { requestTimeoutMs: Infinity },
      ]) {
        await assert.rejects(
          serve(def, { port: 0, handleSignals: false, logger: silent, ...bad }),
          (err: BundleError) => err.code === 'E_SERVE_CONFIG_INVALID' && /must be a positive number/.test(err.message),
          JSON.stringify(bad),
        )
      }
    },
  )
})
