import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { BIN, bundle } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { MODELS } from '../utils/models.js'
import { untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

describe('bundle models load|unload|loaded --url (a running server)', () => {
  it('loads a newer version into the quickstart, lists states, unloads; unreachable and refused requests are one ' +
    'line', {
    timeout: 180_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    const child = spawn(process.execPath, [BIN, 'serve', 'examples/quickstart/service.ts', '--port', '0'], {
      env: { ...process.env, ...env, BUNDLE_ACCESS_LOG: '0' },
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    const exited = new Promise((r) => child.on('exit', r))
    let url = ''
    let port = ''
    try {
      url = await listeningUrl(child)
      port = new URL(url).port
      await untilReady(url, 30_000)
      assert.equal(
        (await bundle(['models', 'save', MODELS.cls, '--name', 'ocr-cls', '--version', '3.0.0'], env)).code,
        0,
      )
      const before = await bundle(['models', 'loaded', '--url', url, '-o', 'json'])
      assert.equal(before.code, 0, before.stderr)
      assert.deepEqual(
        (JSON.parse(before.stdout) as { name: string; version: string; state: string }[]).map(
          (r) => `${r.name}:${r.version} ${r.state}`,
        ),
        ['ocr-cls:2.0.0 READY', 'ocr-cls:3.0.0 UNAVAILABLE'],
      )
      const load = await bundle([
        'models',
        'load',
        'ocr-cls',
        '--version',
        '3.0.0',
        '--config',
        '{"batching":{"maxBatchSize":16}}',
        '--url',
        url,
      ])
      assert.equal(load.code, 0, load.stderr)
      assert.equal(load.stdout.trim(), 'loaded ocr-cls:3.0.0')
      const runners = (await (await fetch(`${url}/runners`)).json()) as {
        config: { model: string; batching: { maxBatchSize: number } }
      }[]
      assert.equal(runners[0]!.config.model, 'ocr-cls:3.0.0')
      assert.equal(runners[0]!.config.batching.maxBatchSize, 16)
      // Without --url: the local server, on $PORT as `bundle serve` takes it.
      const table = await bundle(['models', 'loaded'], { PORT: port })
      assert.equal(table.code, 0, table.stderr)
      assert.match(table.stdout, /ocr-cls\s+3\.0\.0\s+READY/)
      assert.match(table.stdout, /ocr-cls\s+2\.0\.0\s+UNAVAILABLE/)
      assert.equal((await bundle(['models', 'unload', 'ocr-cls'], { PORT: port })).stdout.trim(), 'unloaded ocr-cls')
      assert.equal((await fetch(`${url}/v2/models/ocr-cls`)).status, 404)
      const refused = await bundle(['models', 'load', 'nope', '--url', url])
      assert.equal(refused.code, 1)
      assert.match(
        refused.stderr,
        /^error E_SERVER_REQUEST_FAILED: .* answered 404: failed to load 'nope': the store has no model named nope/m,
      )
    } finally {
      child.kill('SIGTERM')
      await exited
    }
    const gone = await bundle(['models', 'loaded', '--url', url])
    assert.equal(gone.code, 1)
    assert.match(gone.stderr, /^error E_SERVER_UNREACHABLE: cannot reach/m)
    assert.doesNotMatch(gone.stderr, /\n\s+at /)
  })
})
