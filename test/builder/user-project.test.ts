// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import ort from 'onnxruntime-node'
import { MODELS } from '../utils/models.js'
import { freePort } from '../utils/port.js'
import { untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// A user's own project, outside this repository: it installs the packed modelbundle from npm's
// tarball, writes a service and bundle.yaml, type-checks, builds, serves, and asks.

const sh = promisify(execFile)
const REPO = fileURLToPath(new URL('../..', import.meta.url))
const version = (pkg: string) =>
  (JSON.parse(readFileSync(join(REPO, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version

const SERVICE =
  `import { api, io, onnxRunner, service, type Tensor } from 'modelbundle'
import { z } from 'zod'

const cls = onnxRunner('my-cls:1.0.0', { batching: { maxBatchSize: 8, maxLatencyMs: 100 }, ` +
  `warmup: { shapes: { x: [3, 48, 192] } } })

@service({ name: 'my-service', runners: [cls] })
export class MyService {
  @api({ input: io.tensor({ dtype: 'float32', shape: [-1, 3, 48, 192] }), ` +
  `output: io.json(z.object({ upsideDown: z.array(z.boolean()) })) })
  async direction(x: Tensor<'float32'>) {
    const out = await cls.run({ x })
    const p = Object.values(out)[0]!.data as Float32Array
    return { upsideDown: Array.from({ length: x.shape[0]! }, (_, i) => p[i * 2 + 1]! > p[i * 2]!) }
  }
}
`

/** The tsconfig.json block of README "From your own project". */
function readmeTsconfig(): string {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('### From your own project'))
  const m = /```json\n([^`]+)```/.exec(section)
  assert.ok(m, 'the README shows a tsconfig.json')
  const parsed = JSON.parse(m[1]!) as { compilerOptions: Record<string, unknown> }
  assert.equal(parsed.compilerOptions.skipLibCheck, undefined)
  return m[1]!
}

/** The allowScripts the README's `npm pkg set allowScripts.…` line gives a user's project. */
function readmeAllowScripts(): Record<string, boolean> {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8')
  const line = readme.slice(readme.indexOf('### From your own project')).match(/^npm pkg set allowScripts\..*$/m)?.[0]
  assert.ok(line, 'the README sets allowScripts')
  const pairs = [...line.matchAll(/allowScripts\.(\S+)=(true|false)/g)]
  assert.ok(pairs.length > 0)
  return Object.fromEntries(pairs.map((m) => [m[1]!, m[2] === 'true']))
}

describe('modelbundle from a user project (npm pack)', () => {
  it('installs from the packed tarball, type-checks, builds a bundle, serves it and answers', {
    timeout: 900_000,
  }, async () => {
    const dir = tempDir('mb-user-')
    // `npm test` has just built dist/ (its build step): packing with scripts would run `prepare`,
    // the same build, again.
    assert.ok(existsSync(join(REPO, 'dist/cli/main.js')), 'dist/ is built (npm run build)')
    const { stdout } = await sh('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], {
      cwd: REPO,
      maxBuffer: 16 << 20,
    })
    const tarball = stdout.trim().split('\n').at(-1)!
    mkdirSync(join(dir, 'models'))
    copyFileSync(MODELS.cls, join(dir, 'models/cls.onnx'))
    writeFileSync(join(dir, 'service.ts'), SERVICE)
    writeFileSync(
      join(dir, 'bundle.yaml'),
      'service: service.ts:MyService\nmodels:\n  - tag: my-cls:1.0.0\n    source: ./models/cls.onnx\nexclude: ' +
        '[models, "*.tgz"]\n',
    )
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'my-service',
        private: true,
        type: 'module',
        dependencies: { modelbundle: `file:./${tarball}`, zod: `^${version('zod')}` },
        // As the README says (its `npm pkg set` line, read from it): npm runs only the install
        // scripts a project approves, and warns about each one the list leaves out.
        allowScripts: readmeAllowScripts(),
      }),
    )
    // The README's tsconfig.json, as written there (no skipLibCheck).
    writeFileSync(join(dir, 'tsconfig.json'), readmeTsconfig())
    // No ONNXRUNTIME_NODE_INSTALL, no .npmrc: allowScripts alone keeps the install offline and quiet.
    const { ONNXRUNTIME_NODE_INSTALL: _skip, ...clean } = process.env
    const env = { ...clean, BUNDLE_HOME: join(dir, '.modelbundle') }
    const install = await sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: dir,
      env,
      maxBuffer: 64 << 20,
    })
    assert.doesNotMatch(install.stderr, /Unknown (?:project|env|cli) config/, 'no warning about our settings')
    // npm asks about a tarball's own `prepare` (the README denies it next); nothing else.
    const asked = install.stderr.split('\n').filter((l) => /^npm warn install-scripts {3}\S/.test(l))
    assert.deepEqual(
      asked.map((l) => l.split(/\s+/)[3]!.replace(/@[^@]*$/, '')),
      ['modelbundle'],
      `npm asks only about modelbundle's prepare: ${install.stderr}`,
    )
    await sh('npm', ['install-scripts', 'deny', 'modelbundle'], { cwd: dir, env })
    const again = await sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: dir,
      env,
      maxBuffer: 64 << 20,
    })
    assert.doesNotMatch(again.stderr, /install-scripts/, "with the README's steps, npm has nothing more to ask")
    // Every install script in the tree is listed, and nothing else (a stale entry).
    const installed = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean }>
    }
    const scripted = Object.entries(installed.packages)
      .filter(([k, p]) => p.hasInstallScript && k.includes('node_modules/'))
      .map(([k]) => k.slice(k.lastIndexOf('node_modules/') + 'node_modules/'.length))
      .filter((name) => name !== 'modelbundle')
    assert.deepEqual([...new Set(scripted)].sort(), Object.keys(readmeAllowScripts()).sort())
    // The TypeScript a user gets today with `npm install -D typescript @types/node`, not ours.
    await sh('npm', ['install', '-D', '--no-audit', '--no-fund', 'typescript', '@types/node'], {
      cwd: dir,
      env,
      maxBuffer: 64 << 20,
    })
    // The package's declarations type-check in a user's project without skipLibCheck.
    const tsc = await sh('npx', ['tsc', '-p', '.'], { cwd: dir, env }).catch(
      (e: { stdout?: string; stderr?: string }) => assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`),
    )
    assert.equal(tsc.stdout, '')
    const built = await sh('npx', ['bundle', 'build', '.'], { cwd: dir, env })
    const tag = built.stdout.trim()
    assert.match(tag, /^my-service:/)
    // The bundle carries the project's lock entries for what it uses: `npm ci` there is exact.
    const bundleDir = (
      await sh(join(dir, 'node_modules/.bin/bundle'), ['get', tag, '-o', 'path'], { cwd: dir, env })
    ).stdout.trim()
    const lock = JSON.parse(readFileSync(join(bundleDir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string }>
    }
    assert.equal(lock.packages['node_modules/zod']?.version, version('zod'))

    const port = await freePort()
    // The installed bin itself (npx would not pass SIGTERM on to it).
    const child = spawn(join(dir, 'node_modules/.bin/bundle'), ['serve', tag, '--port', String(port)], {
      cwd: dir,
      env,
      stdio: 'ignore',
    })
    const exited = new Promise((r) => child.on('exit', r))
    try {
      await untilReady(`http://127.0.0.1:${port}`, 30_000)
      const x = new Float32Array(2 * 3 * 48 * 192)
      for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.01) * (i < x.length / 2 ? 1 : -1)
      const r = await fetch(`http://127.0.0.1:${port}/direction`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '2,3,48,192' },
        body: x,
      })
      assert.equal(r.status, 200)
      // The same answer onnxruntime gives in this process.
      const session = await ort.InferenceSession.create(MODELS.cls)
      const p = Object.values(await session.run({ x: new ort.Tensor('float32', x, [2, 3, 48, 192]) }))[0]!
        .data as Float32Array
      await session.release()
      assert.deepEqual(await r.json(), { upsideDown: [p[1]! > p[0]!, p[3]! > p[2]!] })
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })
})
