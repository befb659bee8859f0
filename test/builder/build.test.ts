import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { cpSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BIN, bundle, type Listed } from '../utils/cli.js'
import { freePort } from '../utils/port.js'
import { MODELS } from '../utils/models.js'
import { snapshot, tempDir } from '../utils/tmp.js'
import { untilReady } from '../utils/serve.js'

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))
const REPO = fileURLToPath(new URL('../..', import.meta.url))

describe('bundle build', () => {
  it('on a fresh store: imports the models it needs, pins them, and two builds in two stores give one digest', {
    timeout: 180_000,
  }, async () => {
    const homes = [join(tempDir(), 'a'), join(tempDir(), 'b')]
    const tags: string[] = []
    for (const home of homes) {
      const r = await bundle(['build', QUICKSTART], { BUNDLE_HOME: home })
      assert.equal(r.code, 0, r.stderr)
      tags.push(r.stdout.trim())
    }
    const listed = await Promise.all(
      homes.map(
        async (home) => JSON.parse((await bundle(['list', '-o', 'json'], { BUNDLE_HOME: home })).stdout) as Listed[],
      ),
    )
    for (const [i, l] of listed.entries()) {
      assert.equal(l.length, 1)
      assert.equal(l[0]!.tag, tags[i])
      assert.deepEqual(Object.keys(l[0]!).sort(), [
        'created',
        'digest',
        'labels',
        'models',
        'name',
        'size',
        'tag',
        'version',
      ])
      assert.equal(l[0]!.models[0]!.tag, 'ocr-cls:2.0.0')
      assert.deepEqual(l[0]!.models[0]!.requested, ['ocr-cls:latest'])
      assert.deepEqual(l[0]!.labels, { example: 'quickstart' })
    }
    assert.equal(listed[0]![0]!.digest, listed[1]![0]!.digest, 'same inputs, same content digest, in any store')
    assert.notEqual(listed[0]![0]!.created, undefined)

    // The same content again: no second copy; an explicit version: a new tag, the same digest.
    const again = await bundle(['build', QUICKSTART], { BUNDLE_HOME: homes[0]! })
    assert.equal(again.stdout.trim(), tags[0])
    assert.match(again.stderr, /unchanged/)
    const v = await bundle(['build', QUICKSTART, '--version', '1.0.0', '--label', 'stage=dev', '-o', 'json'], {
      BUNDLE_HOME: homes[0]!,
    })
    const built = JSON.parse(v.stdout) as Listed
    assert.equal(built.tag, 'quickstart:1.0.0')
    assert.equal(built.digest, listed[0]![0]!.digest)
    assert.deepEqual(built.labels, { example: 'quickstart', stage: 'dev' })

    const dir = (await bundle(['get', 'quickstart:1.0.0', '-o', 'path'], { BUNDLE_HOME: homes[0]! })).stdout.trim()
    for (const f of ['bundle.json', 'openapi.json', 'README.md', 'Dockerfile', 'package.json', 'app/service.js'])
      assert.ok(existsSync(join(dir, f)), f)
    assert.equal(existsSync(join(dir, 'app/service.ts')), false, 'sources are compiled, not shipped')
    assert.equal(existsSync(join(dir, 'app/preprocess.js')), false, 'local imports are compiled into the entry')
    const manifest = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8')) as {
      dependencies: Record<string, string>
      service: { export: string }
    }
    assert.equal(manifest.service.export, 'Quickstart')
    assert.equal(
      manifest.dependencies.zod,
      (JSON.parse(readFileSync(join(REPO, 'node_modules/zod/package.json'), 'utf8')) as { version: string }).version,
      'pinned to the installed version',
    )
    const openapi = JSON.parse(readFileSync(join(dir, 'openapi.json'), 'utf8')) as { paths: Record<string, unknown> }
    assert.deepEqual(
      Object.keys(openapi.paths)
        .filter((p) => p.startsWith('/classify'))
        .sort(),
      ['/classify', '/classifyTensor'],
    )
  })

  it('--dry-run lists the files and the models it would pin and writes nothing: no bundle, no imported model, the ' +
    'store unchanged', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    assert.equal((await bundle(['models', 'list'], env)).code, 0) // an empty store
    const files = () =>
      Object.fromEntries(
        Object.entries(snapshot(home)).map(([p, size]) => [p, `${size} ${statSync(join(home, p)).mtimeMs}`]),
      )
    const before = files()
    const r = await bundle(['build', QUICKSTART, '--dry-run'], env)
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, '', 'no tag: nothing was built')
    assert.match(r.stderr, /^would package 1 file \([\d.]+ KiB\):\n {2}app\/service\.js +[\d.]+ KiB$/m)
    const pinned = new RegExp(
      /^ {2}ocr-cls:2\.0\.0 {2}(sha256:[0-9a-f]{64}) {2}\(for ocr-cls:latest; not stored: a build/.source +
        / imports it from @gutenye\/ocr-models\/assets\/ch_ppocr_mobile_v2\.0_cls_infer\.onnx\)$/.source,
      'm',
    ).exec(r.stderr)
    assert.ok(pinned, r.stderr)
    assert.deepEqual(files(), before, 'the store is unchanged')
    assert.deepEqual(JSON.parse((await bundle(['models', 'list', '-o', 'json'], env)).stdout), [])
    assert.deepEqual(JSON.parse((await bundle(['list', '-o', 'json'], env)).stdout), [])
    // What it announced is what a build then pins.
    const built = await bundle(['build', QUICKSTART, '-o', 'json'], env)
    assert.equal(built.code, 0, built.stderr)
    assert.equal((JSON.parse(built.stdout) as Listed).models[0]!.digest, pinned[1])
  })

  it('a model a stored bundle pins cannot be deleted without --force; deleting the bundle releases it', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], { BUNDLE_HOME: home })).code, 0)
    const refused = await bundle(['models', 'delete', 'ocr-cls:2.0.0', '-y'], { BUNDLE_HOME: home })
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /E_STORE_MODEL_REFERENCED.*bundle quickstart:1\.0\.0/)
    const del = await bundle(['delete', 'quickstart:1.0.0', '-y'], { BUNDLE_HOME: home })
    assert.equal(del.code, 0, del.stderr)
    assert.equal((await bundle(['get', 'quickstart:1.0.0'], { BUNDLE_HOME: home })).code, 1)
    assert.equal((await bundle(['models', 'delete', 'ocr-cls:2.0.0', '-y'], { BUNDLE_HOME: home })).code, 0)
    const verify = await bundle(['models', 'verify'], { BUNDLE_HOME: home })
    assert.equal(verify.code, 0, verify.stdout + verify.stderr)
  })

  it('clear errors: a model the store lacks names the command that adds it; a compile error names file and line', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const src = tempDir()
    cpSync(QUICKSTART, src, { recursive: true })
    writeFileSync(join(src, 'bundle.yaml'), 'service: service.ts\nmodels: [ocr-cls:2.0.0]\n')
    const missing = await bundle(['build', src], { BUNDLE_HOME: home })
    assert.equal(missing.code, 1)
    assert.match(
      missing.stderr,
      new RegExp(
        /^error E_STORE_MODEL_NOT_FOUND: .*add it with: bundle models save path\/to\/model\.onnx --name/.source +
          / ocr-cls --version 2\.0\.0 /.source,
        'm',
      ),
    )
    assert.doesNotMatch(missing.stderr, /\n\s+at /, 'no stack trace')
    writeFileSync(join(src, 'bundle.yaml'), 'service: broken.ts\n')
    writeFileSync(join(src, 'broken.ts'), 'export const x = (\n')
    const broken = await bundle(['build', src], { BUNDLE_HOME: home })
    assert.equal(broken.code, 1)
    assert.match(broken.stderr, /E_BUNDLE_(BUILD_FAILED|CONFIG_INVALID)|E_SERVICE_LOAD/)
    assert.match(broken.stderr, /broken\.ts/)
    assert.equal(
      JSON.parse((await bundle(['list', '-o', 'json'], { BUNDLE_HOME: home })).stdout).length,
      0,
      'nothing half-built is stored',
    )
  })
})

describe('bundle serve TAG', () => {
  it('runs the compiled bundle from anywhere, on the exact model version it pins', { timeout: 180_000 }, async () => {
    const home = join(tempDir(), 'home')
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], { BUNDLE_HOME: home })).code, 0)
    // A newer "ocr-cls" that is a different model: the runner's tag (ocr-cls:latest) now means it,
    // but the bundle pinned 2.0.0 and its digest.
    assert.equal(
      (await bundle(['models', 'save', MODELS.rec, '--name', 'ocr-cls', '--version', '3.0.0'], { BUNDLE_HOME: home }))
        .code,
      0,
    )
    const port = await freePort()
    const cwd = tempDir() // no node_modules, no sources here
    const child = spawn(process.execPath, [BIN, 'serve', 'quickstart:1.0.0', '--port', String(port)], {
      cwd,
      env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr!.on('data', (c) => (stderr += c))
    const exited = new Promise((r) => child.on('exit', r))
    try {
      const url = `http://127.0.0.1:${port}`
      await untilReady(url, 30_000).catch((e: Error) => assert.fail(`${e.message}: ${stderr}`))
      for (const angle of [0, 180]) {
        const png = readFileSync(new URL(`../fixtures/images/quick-${angle}.png`, import.meta.url))
        const r = await fetch(`${url}/classify`, {
          method: 'POST',
          headers: { 'content-type': 'image/png' },
          body: png,
        })
        assert.equal(r.status, 200)
        assert.equal(((await r.json()) as { angle: number }).angle, angle)
      }
      const runners = (await (await fetch(`${url}/runners`)).json()) as { config: { model: string } }[]
      assert.equal(runners[0]!.config.model, 'ocr-cls:2.0.0')
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })

  it('a tag that is neither a file nor a stored bundle fails with one line', { timeout: 60_000 }, async () => {
    const r = await bundle(['serve', 'nothing-here:1.0.0'], { BUNDLE_HOME: join(tempDir(), 'home') })
    assert.equal(r.code, 1)
    assert.match(r.stderr, /^error E_BUNDLE_NOT_FOUND: /)
  })
})
