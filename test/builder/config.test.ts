import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { readBundleConfig } from '../../builder/index.js'
import { collectFiles, globToRegExp } from '../../builder/files.js'
import type { BundleError } from '../../errors/index.js'
import { tempDir } from '../utils/tmp.js'

const yamlIn = (text: string): string => {
  const dir = tempDir()
  writeFileSync(join(dir, 'bundle.yaml'), text)
  return dir
}

const refuses = async (text: string, re: RegExp) =>
  assert.rejects(
    readBundleConfig(yamlIn(text)),
    (e: BundleError) => e.code === 'E_BUNDLE_CONFIG_INVALID' && e.exitCode === 2 && re.test(e.message),
  )

describe('bundle.yaml', () => {
  it('reads every documented key; model entries may be plain tags', async () => {
    const cfg = await readBundleConfig(
      yamlIn(`service: service.ts:Svc
name: demo
description: A demo
labels: { team: ocr }
include: ['**/*.png']
exclude: ['test/**']
models:
  - ocr-cls:2.0.0
  - { tag: ocr-rec:1.0.0, alias: rec, source: ./rec.onnx }
env: { LOG_LEVEL: debug, WORKERS: 2 }
docker: { baseImage: 'node:20-slim', systemPackages: [libgomp1], gpu: false, user: app }
`),
    )
    assert.equal(cfg.service, 'service.ts:Svc')
    assert.deepEqual(cfg.models, [
      { tag: 'ocr-cls:2.0.0' },
      { tag: 'ocr-rec:1.0.0', alias: 'rec', source: './rec.onnx' },
    ])
    assert.deepEqual(cfg.env, { LOG_LEVEL: 'debug', WORKERS: '2' })
    assert.deepEqual(cfg.docker, { baseImage: 'node:20-slim', systemPackages: ['libgomp1'], gpu: false, user: 'app' })
  })

  it('an unknown key is an error that names it, wherever it is', async () => {
    await refuses('service: s.ts\nexlude: [x]\n', /\(top level\): unknown key "exlude"/)
    await refuses('service: s.ts\ndocker: { baseimage: x }\n', /docker: unknown key "baseimage"/)
    await refuses('service: s.ts\nmodels: [{ tag: a:1, path: x }]\n', /unknown key "path"/)
  })

  it('a misspelt key gets the "did you mean" the CLI gives for flags, at every level', async () => {
    await refuses('service: s.ts\nmodles: [a:1]\n', /\(top level\): unknown key "modles" \(did you mean "models"\?\)$/)
    await refuses(
      'service: s.ts\ndocker: { baseimage: x }\n',
      /unknown key "baseimage" \(did you mean "baseImage"\?\)$/,
    )
    await refuses(
      'service: s.ts\nmodels: [{ tag: a:1, aliass: x }]\n',
      /models\.0: unknown key "aliass" \(did you mean "alias"\?\)$/,
    )
    await refuses(
      'service: s.ts\nensembles: { e: { steps: [{ model: m, inputMap: { a: b }, outputMap: { a: b }, ' +
        'verison: x }] } }\n',
      /ensembles\.e\.steps\.0: unknown key "verison" \(did you mean "version"\?\)$/,
    )
    // Nothing near: the key alone, as before.
    await refuses('service: s.ts\nzzzzzz: 1\n', /unknown key "zzzzzz"$/)
  })

  it('a bad value or map key is quoted in the message, not only the rule it breaks', async () => {
    await refuses('service: s.ts\nname: My Bundle\n', /: name: lower-case letters, digits, .* \(got "My Bundle"\)$/)
    await refuses(
      'service: s.ts\nenv: { BAD-NAME: x }\n',
      /: env: an environment variable name \(got key "BAD-NAME"\)$/,
    )
    await refuses('service: s.ts\nmodels: [{ tag: a:1, alias: Rec }]\n', /models\.0\.alias: .* \(got "Rec"\)$/)
  })

  it('bad values and a missing file say what is wrong', async () => {
    await refuses('name: x\n', /service/)
    await refuses('service: service.py\n', /path\/to\/service.ts/)
    await refuses('service: s.ts\nname: Bad Name\n', /name/)
    await refuses('service: s.ts\ndocker: { systemPackages: ["rm -rf /"] }\n', /Debian package name/)
    await refuses('service: [unclosed\n', /not valid YAML/)
    await assert.rejects(
      readBundleConfig(tempDir()),
      (e: BundleError) => e.code === 'E_BUNDLE_CONFIG_INVALID' && /no such file/.test(e.message),
    )
  })
})

describe('include / exclude', () => {
  it('globs: * within a segment, ** across, {a,b}, plain names cover their subtree', () => {
    assert.equal(globToRegExp('**/*.ts').test('a/b/c.ts'), true)
    assert.equal(globToRegExp('**/*.ts').test('c.ts'), true)
    assert.equal(globToRegExp('*.ts').test('a/c.ts'), false)
    assert.equal(globToRegExp('assets').test('assets/x/y.png'), true)
    assert.equal(globToRegExp('assets').test('assetsx'), false)
    assert.equal(globToRegExp('*.{png,jpg}').test('a.jpg'), true)
    assert.equal(globToRegExp('a.b').test('axb'), false, 'dots are literal')
  })

  it('by default everything but sources, node_modules and excludes; with include, only what it names', () => {
    const dir = tempDir()
    for (const f of [
      'service.ts',
      'util.js',
      'assets/a.png',
      'assets/b.txt',
      'test/x.txt',
      'node_modules/p/index.js',
      'README.md',
    ]) {
      mkdirSync(join(dir, f, '..'), { recursive: true })
      writeFileSync(join(dir, f), f)
    }
    assert.deepEqual(collectFiles(dir, { exclude: ['test/**'] }).files, ['README.md', 'assets/a.png', 'assets/b.txt'])
    assert.deepEqual(collectFiles(dir, { include: ['assets/*.png', '*.ts'] }).files, ['assets/a.png', 'service.ts'])
  })

  it(
    'secret-looking names stay out at any depth; .bundleignore ' + 'adds more; only an exact include brings one back',
    () => {
      const dir = tempDir()
      const all = [
        'a.txt',
        '.env',
        'sub/.env.local',
        '.npmrc',
        '.gitignore',
        '.github/workflows/x.yml',
        'keys/server.key',
        'tls/cert.pem',
        'id_ed25519',
        '.ssh/id_rsa',
        '.aws/credentials',
        'data/big.bin',
        'data/keep.txt',
        'notes.log',
        'node_modules/x/index.js',
        '.git/config',
        '.env.example',
      ]
      for (const f of all) {
        mkdirSync(join(dir, f, '..'), { recursive: true })
        writeFileSync(join(dir, f), f)
      }
      writeFileSync(join(dir, '.bundleignore'), 'data/\n*.log\n')
      const plain = collectFiles(dir)
      assert.deepEqual(plain.files, ['a.txt'])
      assert.deepEqual(plain.secrets, [
        '.aws/credentials',
        '.env',
        '.env.example',
        '.github/workflows/x.yml',
        '.gitignore',
        '.npmrc',
        '.ssh/id_rsa',
        'id_ed25519',
        'keys/server.key',
        'sub/.env.local',
        'tls/cert.pem',
      ])
      // A glob never brings a secret or an ignored file back; the exact path does.
      const back = collectFiles(dir, { include: ['**', '.env.example', 'data/keep.txt', '.aws'] })
      assert.deepEqual(back.files, ['.env.example', 'a.txt', 'data/keep.txt'])
      assert.ok(!back.secrets.includes('.env.example'))
      assert.throws(
        () => collectFiles(dir, { include: ['node_modules/x/index.js'] }),
        (e: BundleError) => e.code === 'E_BUNDLE_CONFIG_INVALID' && /never part of a bundle/.test(e.message),
      )
    },
  )
})
