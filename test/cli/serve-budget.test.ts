import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ModelStore } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { untilReady } from '../utils/serve.js'
import { writeSizedModels } from '../utils/sized-models.js'
import { tempDir } from '../utils/tmp.js'

// `bundle serve --models … --memory-budget`: the flags, the environment and serve.yaml as a user
// gives them, and what a user sees (`bundle models loaded`), through the real CLI.

describe('bundle serve --memory-budget', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }
  const save = async () => {
    const store = ModelStore.open({ home })
    for (const m of writeSizedModels(dir, 3, 2e6, 4e6))
      await store.save({ name: m.name, version: '1', paths: [m.path] })
    store.close()
  }

  it('refuses what it cannot use before a port is opened, each mistake with its reason', {
    timeout: 120_000,
  }, async () => {
    await save()
    const refused = async (args: string[], code: number, re: RegExp, extra: Record<string, string> = {}) => {
      const r = await bundle(['serve', '--port', '0', ...args], { ...env, ...extra })
      assert.equal(r.code, code, r.stderr)
      assert.match(r.stderr, re)
      assert.doesNotMatch(r.stdout, /"listening"/)
    }
    await refused(
      ['--models', '*', '--memory-budget', 'lots'],
      2,
      /E_SERVE_CONFIG_INVALID: --memory-budget "lots" is not a size/,
    )
    await refused(['--memory-budget', '1GiB', 'examples/greeter/service.ts'], 2, /E_CLI_USAGE: --memory-budget bounds/)
    await refused(
      ['--models', '*', '--memory-budget', '1GiB', '--eviction-policy', 'fifo'],
      2,
      /must be lru or tinylfu/,
    )
    await refused(['--models', '*', '--model-load-concurrency', '2'], 2, /applies to models under a memory budget/)
    await refused(['--models', '*'], 2, /BUNDLE_MEMORY_BUDGET "0\.5x"/, { BUNDLE_MEMORY_BUDGET: '0.5x' })
  })

  it('a budget below what the server holds before any model stops it, saying what it measured', {
    timeout: 120_000,
  }, async () => {
    const r = await bundle(['serve', '--port', '0', '--models', '*', '--memory-budget', '20MiB'], env)
    assert.notEqual(r.code, 0)
    assert.match(r.stdout + r.stderr, /--memory-budget 20\.0 MiB is less than the server holds before any model/)
  })

  it('serve.yaml sets the budget; models load on demand and `bundle models loaded` shows size and last use', {
    timeout: 120_000,
  }, async () => {
    const config = join(dir, 'serve.yaml')
    writeFileSync(config, 'models:\n  memoryBudget: 2GiB\n  loadConcurrency: 1\n')
    const child = spawn(process.execPath, [BIN, 'serve', '--models', 'm*', '-c', config, '--port', '0'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = new Promise((r) => child.once('exit', r))
    try {
      const url = await listeningUrl(child)
      await untilReady(url, 60_000)
      const before = await bundle(['models', 'loaded', '--url', url], env)
      assert.equal(before.code, 0, before.stderr)
      assert.match(before.stdout, /m1\s+1\s+UNAVAILABLE \(not loaded \(memory budget\); loads on the next request\)/)
      const r = await fetch(`${url}/v2/models/m1/infer`, {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 8], datatype: 'FP32', data: Array(8).fill(1) }] }),
      })
      assert.equal(r.status, 200)
      const after = await bundle(['models', 'loaded', '--url', url], env)
      assert.match(after.stdout, /Size\s+Last used/)
      assert.match(after.stdout, /m1\s+1\s+READY\s+[\d.]+ MiB\s+20\d\d-\d\d-\d\d \d\d:/)
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })
})
