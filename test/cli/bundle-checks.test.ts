import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BIN, bundle } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import { freePort } from '../utils/port.js'
import { tempDir } from '../utils/tmp.js'

// One small bundle (a runner pinned to hint-model:1.2.0), built once: its archives given to the
// wrong import command, then its pinned model replaced and removed under `bundle serve`.

const SERVICE = fileURLToPath(new URL('../fixtures/missing-model-service.ts', import.meta.url))

/** `bundle serve ARGS` to its exit, trying to connect to `port` all the while it runs. */
async function serveWatchingPort(args: string[], port: number, env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, 'serve', ...args, '--port', String(port)], {
    cwd: tempDir(), // no node_modules, no sources: the bundle runs as stored
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => (stdout += c))
  child.stderr.on('data', (c) => (stderr += c))
  let running = true
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      running = false
      resolve(code)
    }),
  )
  let connected = 0
  let attempts = 0
  const tryConnect = () =>
    new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1')
      s.once('connect', () => (connected++, s.destroy(), resolve()))
      s.once('error', () => resolve())
    })
  // Until it exits: a port it opened, even for a moment between two tries, would show here.
  while (running) {
    attempts++
    await tryConnect()
    await new Promise((r) => setTimeout(r, 5))
  }
  return { code: await exited, stdout, stderr, connected, attempts }
}

describe('a built bundle', () => {
  const home = join(tempDir(), 'home')
  const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }
  const out = tempDir()
  let built: Promise<void> | undefined
  const build = (): Promise<void> =>
    (built ??= (async () => {
      // Inside the repository, so that the service resolves 'modelbundle' as a user's project does.
      const src = mkdtempSync(join(fileURLToPath(new URL('../..', import.meta.url)), '.test-tmp-'))
      after(() => rmSync(src, { recursive: true, force: true }))
      copyFileSync(SERVICE, join(src, 'service.ts'))
      writeFileSync(join(src, 'bundle.yaml'), 'service: service.ts:MissingModel\nname: pinned\n')
      const saved = await bundle(['models', 'save', MODELS.cls, '--name', 'hint-model', '--version', '1.2.0'], env)
      assert.equal(saved.code, 0, saved.stderr)
      const r = await bundle(['build', src, '--version', '1.0.0'], env)
      assert.equal(r.code, 0, r.stderr)
      assert.equal(r.stdout.trim(), 'pinned:1.0.0')
    })())

  it('each archive given to the other import command names the command that fits, and that one works', {
    timeout: 120_000,
  }, async () => {
    await build()
    const bundleFile = join(out, 'pinned-1.0.0.bundle')
    const modelFile = join(out, 'hint-model-1.2.0.bundlemodel')
    assert.equal((await bundle(['export', 'pinned:1.0.0', bundleFile], env)).code, 0)
    assert.equal((await bundle(['models', 'export', 'hint-model:1.2.0', modelFile], env)).code, 0)

    const cases = [
      { args: ['models', 'import', bundleFile], hint: ['import', bundleFile], kinds: 'a bundle archive, not a model' },
      { args: ['import', modelFile], hint: ['models', 'import', modelFile], kinds: 'a model archive, not a bundle' },
    ]
    for (const c of cases) {
      const fresh = { BUNDLE_HOME: join(tempDir(), 'fresh') }
      const wrong = await bundle(c.args, fresh)
      assert.equal(wrong.code, 1)
      assert.equal(
        wrong.stderr,
        `error E_ARCHIVE_MANIFEST_INVALID: ${c.args.at(-1)} is ${c.kinds} archive: ` +
          `import it with \`bundle ${c.hint.join(' ')}\`\n`,
      )
      const hinted = await bundle(c.hint, fresh)
      assert.equal(hinted.code, 0, `the hinted command works: ${hinted.stderr}`)
    }
  })

  // Changes the store: runs last.
  it('bundle serve TAG whose pinned model was replaced, then removed: the coded error, and no port ever opens', {
    timeout: 120_000,
  }, async () => {
    await build()
    // Another model under the pinned tag: same name and version, other content.
    assert.equal((await bundle(['models', 'delete', 'hint-model:1.2.0', '--force', '-y'], env)).code, 0)
    const other = await bundle(
      ['models', 'save', MODELS.cls, MODELS.keys, '--name', 'hint-model', '--version', '1.2.0'],
      env,
    )
    assert.equal(other.code, 0, other.stderr)
    const replaced = await serveWatchingPort(['pinned:1.0.0'], await freePort(), env)
    assert.equal(replaced.code, 1)
    assert.match(replaced.stderr, /^error E_BUNDLE_MODEL_MISMATCH: runner hint-model: [^\n]*\n$/, 'one line')
    assert.match(replaced.stderr, /pins hint-model:1\.2\.0 with digest sha256:\w+, the store has sha256:\w+/)
    assert.doesNotMatch(replaced.stdout, /listening/, 'the server never said it listens')
    assert.equal(replaced.connected, 0, `no connection succeeded in ${replaced.attempts} attempts`)

    assert.equal((await bundle(['models', 'delete', 'hint-model:1.2.0', '--force', '-y'], env)).code, 0)
    const missing = await serveWatchingPort(['pinned:1.0.0'], await freePort(), env)
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /^error E_BUNDLE_MODEL_MISMATCH: runner hint-model: [^\n]*\n$/, 'one line')
    assert.match(
      missing.stderr,
      /pins hint-model:1\.2\.0, which is not in the store at .*; import the bundle's archive/,
    )
    assert.doesNotMatch(missing.stdout, /listening/)
    assert.equal(missing.connected, 0, `no connection succeeded in ${missing.attempts} attempts`)
  })
})
