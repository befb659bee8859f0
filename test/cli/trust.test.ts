import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ModelStore } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { untilReady } from '../utils/serve.js'
import { sizedInput, writeSizedModels } from '../utils/sized-models.js'
import { tempDir } from '../utils/tmp.js'

// Keys, signing and verification as a user runs them, through the real CLI, and `bundle serve
// --trust` refusing a changed model while it serves the signed one.

describe('bundle keys / models sign / verify / serve --trust', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }
  const keys = join(dir, 'keys')
  const pub = join(keys, 'public.pem')

  it('generates keys, signs, verifies, and names what fails with its code and exit 1', {
    timeout: 120_000,
  }, async () => {
    const gen = await bundle(['keys', 'generate', keys], env)
    assert.equal(gen.code, 0, gen.stderr)
    assert.equal(statSync(join(keys, 'private.pem')).mode & 0o777, 0o600)
    assert.equal((await bundle(['keys', 'generate', keys], env)).code, 1)
    const [good, bad] = writeSizedModels(dir, 2, 20_000, 30_000)
    for (const [name, m] of [
      ['good', good!],
      ['bad', bad!],
    ] as const)
      assert.equal((await bundle(['models', 'save', m.path, '--name', name, '--version', '1'], env)).code, 0)
    const sign = await bundle(['models', 'sign', 'good', 'bad', '--key', join(keys, 'private.pem')], env)
    assert.equal(sign.code, 0, sign.stderr)
    assert.match(sign.stdout, /signed good:1 \(1 files\)/)
    const noKey = await bundle(['models', 'sign', 'good', '--key', pub], env)
    assert.equal(noKey.code, 2)
    assert.match(noKey.stderr, /E_KEY_INVALID: --key .* is not a PEM private key \(it is a public key/)
    // `models get -o path` lays the signature beside the files, as model_signing names it.
    const path = (await bundle(['models', 'get', 'good', '-o', 'path'], env)).stdout.trim()
    assert.ok(existsSync(join(path, 'model.sig')))
    assert.equal(
      JSON.parse(readFileSync(join(path, 'model.sig'), 'utf8')).dsseEnvelope.payloadType,
      'application/vnd.in-toto+json',
    )
    // One byte of bad's stored file changes.
    const store = ModelStore.open({ home })
    const blob = store.blobs.path(store.get('bad').files[0]!.sha256)
    store.close()
    chmodSync(blob, 0o644)
    const bytes = readFileSync(blob)
    bytes[200] = bytes[200]! ^ 1
    writeFileSync(blob, bytes)
    const v = await bundle(['verify', 'good', 'bad', '--trust', pub], env)
    assert.equal(v.code, 1)
    assert.match(v.stdout, /good:1: verified, 1 files signed by .*public\.pem/)
    assert.match(v.stderr, /error E_SIG_FILE_MODIFIED: bad:1: content differs from what was signed: .*\.onnx/)
    const noTrust = await bundle(['verify', 'good'], env)
    assert.equal(noTrust.code, 2)
    assert.match(noTrust.stderr, /E_CLI_USAGE: bundle verify needs the public keys you trust/)
  })

  it('serve --trust serves the signed model and refuses the changed one, which never loads', {
    timeout: 120_000,
  }, async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--models', '*', '--trust', pub, '--port', '0'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stderr!.on('data', (c) => (out += c))
    const exited = new Promise((r) => child.once('exit', r))
    try {
      const url = await listeningUrl(child)
      await untilReady(url, 60_000).catch(() => undefined) // a model that failed to load leaves the rest serving
      const input = sizedInput()
      const infer = (name: string) =>
        fetch(`${url}/v2/models/${name}/infer`, {
          method: 'POST',
          body: JSON.stringify({
            inputs: [{ name: 'x', shape: input.shape, datatype: 'FP32', data: [...input.data] }],
          }),
        })
      assert.equal((await infer('good')).status, 200)
      const index = (await (await fetch(`${url}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string
        state: string
        reason?: string
      }[]
      const bad = index.find((r) => r.name === 'bad')!
      assert.equal(bad.state, 'UNAVAILABLE')
      assert.match(bad.reason!, /E_SIG_FILE_MODIFIED: content differs from what was signed/)
      assert.notEqual((await infer('bad')).status, 200)
      const load = await fetch(`${url}/v2/repository/models/bad/load`, { method: 'POST' })
      assert.equal(load.status, 403)
      // The Open Inference Protocol's error body is a message; it names the code.
      assert.match(
        ((await load.json()) as { error: string }).error,
        /failed to load 'bad': E_SIG_FILE_MODIFIED: content/,
      )
    } finally {
      child.kill('SIGTERM')
      await exited
    }
    assert.doesNotMatch(out, /\n\s+at /, 'no stack trace')
  })

  it('under a memory budget a model is verified when a request loads it: the changed one is refused, 403', {
    timeout: 120_000,
  }, async () => {
    const args = ['serve', '--models', '*', '--memory-budget', '4GiB', '--trust', pub, '--port', '0']
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = new Promise((r) => child.once('exit', r))
    try {
      const url = await listeningUrl(child)
      await untilReady(url, 60_000)
      const input = sizedInput()
      const infer = (name: string) =>
        fetch(`${url}/v2/models/${name}/infer`, {
          method: 'POST',
          body: JSON.stringify({
            inputs: [{ name: 'x', shape: input.shape, datatype: 'FP32', data: [...input.data] }],
          }),
        })
      assert.equal((await infer('good')).status, 200)
      const bad = await infer('bad')
      assert.equal(bad.status, 403)
      assert.match(((await bad.json()) as { error: string }).error, /content differs from what was signed/)
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })
})
