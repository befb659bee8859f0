import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundle } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// An error's hint is a command a user pastes: these tests paste it (filling in only the path
// to their own file) and check that it fixes what failed.

const MISSING = fileURLToPath(new URL('../fixtures/missing-model-service.ts', import.meta.url))

/** The `bundle …` command an error message tells the user to run, as arguments. */
function hintedCommand(message: string): string[] {
  const m = /(?:add it with|run):? `?(bundle [^`;\n(]+)`?/.exec(message)
  assert.ok(m, `the message names a command: ${message}`)
  return m[1]!.trim().split(/\s+/).slice(1)
}

describe('error hints are commands that work', () => {
  it('a runner whose model is not stored: serve fails naming the save command; running it lets serve start', {
    timeout: 120_000,
  }, async () => {
    const env = { BUNDLE_HOME: join(tempDir(), 'home'), BUNDLE_ACCESS_LOG: '0' }
    const failed = await bundle(['serve', MISSING, '--port', '0'], env)
    assert.equal(failed.code, 1)
    const line = failed.stderr.trim().split('\n').at(-1)!
    assert.match(line, /^error E_STORE_MODEL_NOT_FOUND: runner hint-model needs model hint-model:1\.2\.0/)
    const args = hintedCommand(line).map((a) => (a === 'path/to/model.onnx' ? MODELS.cls : a))
    assert.deepEqual(args.slice(0, 2), ['models', 'save'])
    const saved = await bundle(args, env)
    assert.equal(saved.code, 0, saved.stderr)
    const s = await serveReady(MISSING, [], env)
    try {
      const r = await fetch(`${s.url}/which`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      assert.deepEqual(await r.json(), { model: 'hint-model:1.2.0' })
    } finally {
      await s.stop('SIGTERM')
    }
  })

  it('bundle build of a project whose models are not stored: each hint, pasted, lets the build through', {
    timeout: 180_000,
  }, async () => {
    const { cpSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs')
    const quickstart = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))
    for (const yaml of ['service: service.ts\nmodels: [ocr-cls:2.0.0]\n', 'service: service.ts\n']) {
      const env = { BUNDLE_HOME: join(tempDir(), 'home') }
      // Inside the repository, so that the service resolves 'modelbundle' as a user's project does.
      const src = mkdtempSync(join(fileURLToPath(new URL('../..', import.meta.url)), '.test-tmp-'))
      after(() => rmSync(src, { recursive: true, force: true }))
      cpSync(quickstart, src, { recursive: true })
      writeFileSync(join(src, 'bundle.yaml'), yaml)
      const failed = await bundle(['build', src, '--version', '1.0.0'], env)
      assert.equal(failed.code, 1, failed.stderr)
      assert.match(failed.stderr, /^error E_STORE_MODEL_NOT_FOUND: /)
      const saved = await bundle(
        hintedCommand(failed.stderr).map((a) => (a === 'path/to/model.onnx' ? MODELS.cls : a)),
        env,
      )
      assert.equal(saved.code, 0, saved.stderr)
      const built = await bundle(['build', src, '--version', '1.0.0'], env)
      assert.equal(built.code, 0, `${yaml}: ${built.stderr}`)
    }
  })
})
