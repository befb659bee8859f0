import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

// `npm ci` as the README says it, with nothing else: no warning about our settings, and no
// CUDA download (onnxruntime-node's install script, which fetches it, is denied in allowScripts).

const sh = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))

describe('installing modelbundle', () => {
  it('npm prints no "Unknown project config" warning for our .npmrc', async () => {
    const { ONNXRUNTIME_NODE_INSTALL: _skip, ...env } = process.env
    const r = await sh('npm', ['pkg', 'get', 'name'], { cwd: ROOT, env })
    assert.equal(r.stdout.trim(), '"modelbundle"')
    assert.doesNotMatch(r.stderr, /Unknown (?:project|user|env|cli) config/)
  })

  it("onnxruntime-node's install script is denied, so the install fetched no CUDA binaries", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      allowScripts: Record<string, boolean>
    }
    assert.equal(pkg.allowScripts['onnxruntime-node'], false)
    const bin = join(ROOT, 'node_modules/onnxruntime-node/bin/napi-v6', process.platform, process.arch)
    assert.ok(existsSync(join(bin, 'onnxruntime_binding.node')), 'the CPU build comes with the package')
    assert.equal(existsSync(join(bin, 'libonnxruntime_providers_cuda.so')), false, 'no CUDA provider was downloaded')
  })
})
