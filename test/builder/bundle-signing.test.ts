import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ModelStore } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// A signed bundle as a user makes and serves it: the quickstart built, its models and then the
// bundle signed, verified, served with --trust; then one byte of its code changed, and the same
// commands refuse it before any of its code runs.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

/** `bundle serve ARGS`: whether it came up ready (then it is stopped) or exited, with its output. */
async function serveOnce(args: string[], env: Record<string, string>): Promise<{ ready: boolean; out: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args, '--port', '0'], {
    env: { ...process.env, ...env, BUNDLE_ACCESS_LOG: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += c))
  child.stderr!.on('data', (c) => (out += c))
  const exited = new Promise<number | null>((r) => child.once('exit', r))
  try {
    // A server that exits before it listens rejects listeningUrl: that is an answer here, not a failure.
    const url = await listeningUrl(child).catch(() => undefined)
    if (url === undefined) return { ready: false, out }
    await untilReady(url, 120_000)
    return { ready: true, out }
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

describe('signed bundles: bundle sign, verify, serve --trust', () => {
  const dir = tempDir()
  const env = { BUNDLE_HOME: join(dir, 'home') }
  const pub = join(dir, 'keys', 'public.pem')
  const key = join(dir, 'keys', 'private.pem')

  it('signs a bundle over its files and its models’ signatures; serves it only while it verifies', {
    timeout: 600_000,
  }, async () => {
    assert.equal((await bundle(['keys', 'generate', join(dir, 'keys')], env)).code, 0)
    const built = await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)
    assert.equal(built.code, 0, built.stderr)
    const info = JSON.parse((await bundle(['get', 'quickstart:1.0.0', '-o', 'json'], env)).stdout) as {
      models: { tag: string }[]
      manifest: { service: { entry: string } }
      files: { path: string; sha256: string }[]
    }
    // Its models are not signed yet: the bundle cannot be.
    const early = await bundle(['sign', 'quickstart:1.0.0', '--key', key], env)
    assert.equal(early.code, 1)
    assert.match(early.stderr, /E_SIG_UNSIGNED: model .* of the bundle is not signed: sign it first/)
    const models = info.models.map((m) => m.tag)
    assert.equal((await bundle(['models', 'sign', ...models, '--key', key], env)).code, 0)
    const signed = await bundle(['sign', 'quickstart:1.0.0', '--key', key], env)
    assert.equal(signed.code, 0, signed.stderr)
    const verified = await bundle(['verify', 'quickstart:1.0.0', '--trust', pub], env)
    assert.equal(verified.code, 0, verified.stderr)
    assert.match(
      verified.stdout,
      new RegExp(`bundle quickstart:1.0.0: verified, .* its ${models.length} models verified`),
    )
    assert.equal((await serveOnce(['quickstart:1.0.0', '--trust', pub], env)).ready, true)
    // `bundle get -o path` lays bundle.sig beside the files: the directory verifies and serves with --trust.
    const laidOut = (await bundle(['get', 'quickstart:1.0.0', '-o', 'path'], env)).stdout.trim()
    assert.ok(existsSync(join(laidOut, 'bundle.sig')))
    assert.equal((await serveOnce([laidOut, '--trust', pub], env)).ready, true)
    // bundle export / import carry the bundle's and its models' signatures: it verifies in another store.
    const archive = join(dir, 'quickstart.bundle')
    assert.equal((await bundle(['export', 'quickstart:1.0.0', archive], env)).code, 0)
    const elsewhere = { BUNDLE_HOME: join(dir, 'elsewhere') }
    assert.equal((await bundle(['import', archive], elsewhere)).code, 0)
    const there = await bundle(['verify', 'quickstart:1.0.0', '--trust', pub], elsewhere)
    assert.equal(there.code, 0, there.stderr)
    const dockerfile = await bundle(['containerize', 'quickstart:1.0.0', '--print-dockerfile', '--trust', pub], env)
    assert.match(
      dockerfile.stdout,
      /COPY trust \/etc\/modelbundle\/trust\nENV BUNDLE_TRUST=\/etc\/modelbundle\/trust\/0\.pem/,
    )

    // One byte of the compiled service changes in the store.
    const entry = info.files.find((f) => f.path === info.manifest.service.entry)!
    const store = ModelStore.open({ home: env.BUNDLE_HOME })
    const blob = store.blobs.path(entry.sha256)
    store.close()
    chmodSync(blob, 0o644)
    const bytes = readFileSync(blob)
    // The last byte (a newline, or anything): the code still runs, so only verification can tell.
    bytes[bytes.length - 1] = bytes[bytes.length - 1] === 0x0a ? 0x20 : 0x0a
    writeFileSync(blob, bytes)
    const refused = await bundle(['verify', 'quickstart:1.0.0', '--trust', pub], env)
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /error E_SIG_FILE_MODIFIED: bundle quickstart:1.0.0: content differs/)
    const served = await serveOnce(['quickstart:1.0.0', '--trust', pub], env)
    assert.equal(served.ready, false)
    assert.match(served.out, /E_SIG_FILE_MODIFIED/)
    assert.doesNotMatch(served.out, /"listening"/)
    // Without --trust nothing is verified and nothing changes.
    assert.equal((await serveOnce(['quickstart:1.0.0'], env)).ready, true)
  })
})
