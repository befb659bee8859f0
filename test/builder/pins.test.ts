import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { modelForRunner, type ListedModel, type ResolvedConfig } from '../../builder/index.js'
import type { BundleError } from '../../errors/index.js'
import type { ModelInfo } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import { serveReady } from '../utils/serve.js'
import { quickstartCopy, tempDir } from '../utils/tmp.js'

// The quickstart's bundle.yaml pins ocr-cls:2.0.0 while its runner asks for ocr-cls:latest. A
// store that also holds a newer ocr-cls must not change what the bundle pins and serves.

/**
 * A CLI run that must end by itself; one still running after a minute (a server that started) is stopped and reported.
 */
async function exits(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (c) => (stderr += c))
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)))
  clearTimeout(timer)
  return { code, stderr }
}

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const QUICKSTART = join(REPO, 'examples/quickstart')

describe('bundle.yaml models: pin what runners of that name get', () => {
  it('with ocr-cls 3.0.0 newer in the store: the bundle pins 2.0.0 only, and the bundle, the project directory ' +
    'and its service file all serve 2.0.0', {
    timeout: 300_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    const save = (version: string, paths: string[]) =>
      bundle(['models', 'save', ...paths, '--name', 'ocr-cls', '--version', version, '-o', 'json'], env)
    const v2 = await save('2.0.0', [MODELS.cls])
    assert.equal(v2.code, 0, v2.stderr)
    // Same classifier plus a file: another digest, and the newest version (what "latest" means).
    const notes = join(tempDir(), 'notes.txt')
    writeFileSync(notes, 'generation 3\n')
    const v3 = await save('3.0.0', [MODELS.cls, notes])
    assert.equal(v3.code, 0, v3.stderr)
    const d2 = (JSON.parse(v2.stdout) as { digest: string }).digest
    assert.notEqual((JSON.parse(v3.stdout) as { digest: string }).digest, d2)
    assert.match((await bundle(['models', 'get', 'ocr-cls:latest', '-o', 'json'], env)).stdout, /"version": "3\.0\.0"/)

    const built = await bundle(['build', QUICKSTART, '--version', '1.0.0', '-o', 'json'], env)
    assert.equal(built.code, 0, built.stderr)
    assert.deepEqual((JSON.parse(built.stdout) as { models: unknown[] }).models, [
      { tag: 'ocr-cls:2.0.0', digest: d2, requested: ['ocr-cls:latest'] },
    ])

    const png = readFileSync(join(REPO, 'test/fixtures/images/hello-180.png'))
    for (const entry of ['quickstart:1.0.0', QUICKSTART, join(QUICKSTART, 'service.ts')]) {
      const s = await serveReady(entry, [], env)
      try {
        const runners = (await (await fetch(`${s.url}/runners`)).json()) as {
          name: string
          config: { model: string; digest: string }
        }[]
        assert.deepEqual(
          runners.filter((r) => r.name === 'ocr-cls').map((r) => [r.config.model, r.config.digest]),
          [['ocr-cls:2.0.0', d2]],
          entry,
        )
        const meta = (await (await fetch(`${s.url}/v2/models/ocr-cls`)).json()) as { versions: string[] }
        assert.deepEqual(meta.versions, ['2.0.0'], entry)
        const r = await fetch(`${s.url}/classify`, {
          method: 'POST',
          headers: { 'content-type': 'image/png' },
          body: png,
        })
        assert.equal(((await r.json()) as { angle: number }).angle, 180, entry)
      } finally {
        await s.stop('SIGTERM')
      }
    }
  })

  it('a runner asking for another exact version than bundle.yaml pins is refused at build and when served from ' +
    'source, naming both', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const src = quickstartCopy()
    writeFileSync(
      join(src, 'service.ts'),
      readFileSync(join(src, 'service.ts'), 'utf8').replace(
        "onnxRunner('ocr-cls:latest'",
        "onnxRunner('ocr-cls:3.0.0'",
      ),
    )
    for (const args of [
      ['build', src],
      ['serve', join(src, 'service.ts'), '--port', '0'],
    ]) {
      const r = await exits(args, { BUNDLE_HOME: home })
      assert.equal(r.code, 2, `${args[0]}: ${r.stderr}`)
      assert.match(
        r.stderr,
        new RegExp(
          /^error E_BUNDLE_CONFIG_INVALID: .*bundle\.yaml: runner ocr-cls asks for ocr-cls:3\.0\.0, but/.source +
            / models: pins ocr-cls at 2\.0\.0/.source,
          'm',
        ),
        args[0],
      )
    }
    assert.equal(
      JSON.parse((await bundle(['list', '-o', 'json'], { BUNDLE_HOME: home })).stdout).length,
      0,
      'nothing stored',
    )
  })
})

describe('modelForRunner', () => {
  const cfg = { file: '/p/bundle.yaml' } as ResolvedConfig
  const model = (tag: string) =>
    ({ tag, name: tag.split(':')[0]!, version: tag.split(':')[1]!, digest: `sha256:${tag}` }) as ModelInfo
  const listed: ListedModel[] = [
    { request: { tag: 'ocr-cls:2.1.0' }, model: model('ocr-cls:2.1.0') },
    { request: { tag: 'det:1.0.0', alias: 'detector' }, model: model('det:1.0.0') },
  ]
  const pick = (tag: string, l = listed) => modelForRunner(cfg, l, { name: 'r', tag })?.model.tag
  const refused = (tag: string, re: RegExp, l = listed) =>
    assert.throws(
      () => pick(tag, l),
      (e: BundleError) => e.code === 'E_BUNDLE_CONFIG_INVALID' && re.test(e.message),
      tag,
    )

  it(
    'name, name:latest, a satisfied range, the exact or a prefix version, and an alias resolve to the listed ' +
      'model',
    () => {
      for (const tag of ['ocr-cls', 'ocr-cls:latest', 'ocr-cls@^2', 'ocr-cls@~2.1', 'ocr-cls:2.1.0', 'ocr-cls:2.1'])
        assert.equal(pick(tag), 'ocr-cls:2.1.0', tag)
      assert.equal(pick('detector'), 'det:1.0.0')
      assert.equal(pick('rec:latest'), undefined, 'a model bundle.yaml does not list resolves in the store')
    },
  )

  it('a contradiction is refused naming both', () => {
    refused('ocr-cls:3.0.0', /runner r asks for ocr-cls:3\.0\.0, but models: pins ocr-cls at 2\.1\.0/)
    refused('ocr-cls@^3', /asks for ocr-cls@\^3, but models: pins ocr-cls at 2\.1\.0, which does not satisfy \^3/)
    const two = [...listed, { request: { tag: 'ocr-cls:3.0.0' }, model: model('ocr-cls:3.0.0') }]
    assert.equal(pick('ocr-cls:3.0.0', two), 'ocr-cls:3.0.0')
    assert.equal(pick('ocr-cls@>=2', two), 'ocr-cls:3.0.0', 'the highest listed version in the range')
    refused(
      'ocr-cls:latest',
      /pins ocr-cls at 2\.1\.0 and 3\.0\.0; with several versions listed, the runner's tag must name one/,
      two,
    )
  })
})
