// test-slot: podman (a build beside another podman build failed midway: one such file at a time)
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join, relative } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { gunzipSync } from 'node:zlib'
import { Parser } from 'tar'
import { bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

// A project holding every kind of file that must never ship: each is left out of the stored
// bundle, of its exported archive and of its container image, whatever include globs say; one
// secret-looking file comes back because include names its exact path.

const sh = promisify(execFile)
const REPO = fileURLToPath(new URL('../..', import.meta.url))
const QUICKSTART = join(REPO, 'examples/quickstart')
const hasPodman = spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0
const required = process.env.BUNDLE_REQUIRE_CONTAINER_TESTS === '1'

/** Left out, each for its own reason; the value is a marker no other file in the world holds. */
const EXCLUDED = [
  '.env',
  '.env.production',
  'sub/.env.local',
  '.npmrc',
  '.gitignore',
  '.github/workflows/x.yml',
  'keys/server.key',
  'certs/tls.pem',
  'id_ed25519',
  '.ssh/id_rsa',
  '.aws/credentials',
  'node_modules/x/index.js',
  '.git/config',
  'private/notes.txt', // .bundleignore: private/
  'debug.log', // .bundleignore: *.log
]
const SHIPPED_SECRET = 'deploy/.env.public'
const STORE = 'model-store' // BUNDLE_HOME inside the project

/** Every entry of a gzip tar, nested .bundlemodel archives opened too: path → body. */
function tarEntries(gz: Buffer, prefix = ''): Map<string, Buffer> {
  const out = new Map<string, Buffer>()
  const parser = new Parser({
    onReadEntry: (e) => {
      const chunks: Buffer[] = []
      e.on('data', (c: Buffer) => chunks.push(c))
      e.on('end', () => out.set(prefix + e.path, Buffer.concat(chunks)))
    },
  })
  parser.end(gunzipSync(gz))
  for (const [path, body] of [...out])
    if (path.endsWith('.bundlemodel')) for (const [p, b] of tarEntries(body, `${path}!`)) out.set(p, b)
  return out
}

function filesUnder(root: string): string[] {
  const out: string[] = []
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const f = join(d, n)
      if (statSync(f).isDirectory()) walk(f)
      else out.push(relative(root, f))
    }
  }
  walk(root)
  return out.sort()
}

describe('secrets never ship', () => {
  const src = mkdtempSync(join(REPO, '.test-tmp-'))
  after(() => rmSync(src, { recursive: true, force: true }))
  const home = join(src, STORE)
  const env = { BUNDLE_HOME: home }
  const elsewhere = tempDir() // outside the project
  const markers = new Map<string, string>()
  const yaml = readFileSync(join(QUICKSTART, 'bundle.yaml'), 'utf8')
  // Globs that match every left-out file: none of them may bring one back; the exact path does.
  const globs = [
    'assets/**',
    SHIPPED_SECRET,
    '**/.env*',
    '.npmrc*',
    '.git*',
    '.git*/**',
    '**/*.key',
    '**/*.pem',
    '**/id_*',
    '.ssh/**',
    '.aws/**',
    'node_modules/**',
    'private/*',
    '*.log',
    `${STORE}/**`,
  ]
  let tag = ''

  before(() => {
    cpSync(QUICKSTART, src, { recursive: true })
    for (const f of [...EXCLUDED, SHIPPED_SECRET, 'assets/readme.txt']) {
      const marker = `MARKER-${f.replace(/\W/g, '_')}-${randomBytes(8).toString('hex')}`
      markers.set(f, marker)
      mkdirSync(join(src, f, '..'), { recursive: true })
      writeFileSync(join(src, f), `${marker}\n`)
    }
    writeFileSync(join(src, '.bundleignore'), '# more than the built-in set\nprivate/\n*.log\n')
    // Harmless names, secret targets: a link out of the project, and one to a secret inside it.
    const outside = join(elsewhere, 'id_rsa')
    writeFileSync(outside, 'MARKER-outside-key\n')
    symlinkSync(outside, join(src, 'assets/key.txt'))
    symlinkSync('../.aws/credentials', join(src, 'assets/settings.txt'))
  })

  const leftOut = EXCLUDED.map((f) => `app/${f}`)

  it('by default: bundle build lists what it packaged with sizes, warns naming the secrets it left out, and ' +
    'stores none of them', {
    timeout: 180_000,
  }, async () => {
    const r = await bundle(['build', src, '--version', '0.1.0'], env)
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stderr, /^packaged 2 files \([\d.]+ KiB\):$/m)
    assert.match(r.stderr, /^ {2}app\/service\.js +[\d.]+ KiB$/m)
    assert.match(r.stderr, /^ {2}app\/assets\/readme\.txt +\d+ B$/m)
    const warning = r.stderr.split('\n').find((l) => l.startsWith('warning: '))
    assert.ok(warning, r.stderr)
    for (const f of [
      '.env',
      'sub/.env.local',
      '.npmrc',
      'keys/server.key',
      '.ssh/id_rsa',
      '.aws/credentials',
      SHIPPED_SECRET,
    ])
      assert.ok(warning.includes(f), `${f} named in: ${warning}`)
    assert.match(warning, /exact path under include:/)
    assert.doesNotMatch(
      warning,
      /node_modules|private\/notes|debug\.log|model-store/,
      'only secret-looking files are warned about',
    )
    assert.ok(warning.includes('assets/settings.txt'), 'a link to a secret counts as one')
    assert.match(r.stderr, /^warning: left out 1 symbolic link pointing outside the project: assets\/key\.txt;/m)
    const dir = (await bundle(['get', 'quickstart:0.1.0', '-o', 'path'], env)).stdout.trim()
    const files = filesUnder(dir)
    assert.deepEqual(
      files.filter((f) => f.startsWith('app/')),
      ['app/assets/readme.txt', 'app/service.js'],
    )
  })

  it('with include globs matching all of them: only the exactly named one comes back; none is in the bundle, its ' +
    '.bundle archive or its image', {
    timeout: 600_000,
  }, async () => {
    writeFileSync(join(src, 'bundle.yaml'), `${yaml}include:\n${globs.map((g) => `  - '${g}'\n`).join('')}`)
    const r = await bundle(['build', src, '--version', '1.0.0'], env)
    assert.equal(r.code, 0, r.stderr)
    tag = r.stdout.trim()
    assert.equal(tag, 'quickstart:1.0.0')
    assert.match(r.stderr, /^ {2}app\/deploy\/\.env\.public +\d+ B$/m)
    assert.doesNotMatch(r.stderr.split('\n').find((l) => l.startsWith('warning: ')) ?? '', /deploy\/\.env\.public/)

    // The stored bundle directory.
    const dir = (await bundle(['get', tag, '-o', 'path'], env)).stdout.trim()
    const files = filesUnder(dir)
    assert.deepEqual(
      files.filter((f) => f.startsWith('app/')),
      ['app/assets/readme.txt', `app/${SHIPPED_SECRET}`, 'app/service.js'],
    )
    for (const f of leftOut) assert.ok(!files.includes(f), f)
    assert.ok(!files.some((f) => f.includes(STORE) || f.endsWith('index.db')), 'the model store stays out')
    const all = Buffer.concat(files.map((f) => readFileSync(join(dir, f))))
    for (const f of EXCLUDED) assert.equal(all.indexOf(markers.get(f)!), -1, `${f} content is not in the bundle`)
    assert.notEqual(all.indexOf(markers.get(SHIPPED_SECRET)!), -1)

    // The exported archive, the models inside it included.
    const out = tempDir()
    assert.equal((await bundle(['export', tag, out], env)).code, 0)
    const entries = tarEntries(readFileSync(join(out, 'quickstart-1.0.0.bundle')))
    const names = [...entries.keys()]
    assert.ok(
      names.some((n) => n.includes('.bundlemodel!')),
      `the pinned model is inside: ${names.join(', ')}`,
    )
    assert.ok(names.includes(`files/app/${SHIPPED_SECRET}`), names.join(', '))
    for (const f of leftOut) assert.ok(!names.some((n) => n.endsWith(f)), `${f} not in the archive`)
    const bodies = Buffer.concat([...entries.values()])
    for (const f of EXCLUDED) assert.equal(bodies.indexOf(markers.get(f)!), -1, `${f} content is not in the archive`)
  })

  it('nor in the image built from it (podman)', {
    timeout: 600_000,
    skip:
      !hasPodman && !required
        ? 'podman is not installed (docs/bundles.md "Containers" says how); CI installs it'
        : false,
  }, async () => {
    assert.ok(tag, 'the bundle of the previous test')
    const base = `localhost/mb-secrets-base:${process.pid}`
    const image = `localhost/mb-secrets:${process.pid}`
    try {
      await sh(join(REPO, 'docker/local-base-image.sh'), ['-t', base, join(REPO, 'node_modules')], {
        maxBuffer: 64 << 20,
      })
      const built = await bundle(['containerize', tag, '-t', image, '--backend', 'podman', '--base-image', base], env)
      assert.equal(built.code, 0, built.stderr.slice(-2000))
      // The bundle's files in the image (its npm dependencies under /app/node_modules aside).
      const list =
        `const fs=require('fs'),p=require('path');const o=[];const w=d=>{for(const n of fs.readdirSync(d)){const ` +
        `f=p.join(d,n);if(f==='/app/node_modules')continue;fs.statSync(f).isDire` +
        `ctory()?w(f):o.push(f)}};w('/app');console.log(JSON.stringify(o.sort()))`
      const inImage = JSON.parse(
        (await sh('podman', ['run', '--rm', '--entrypoint', 'node', image, '-e', list])).stdout,
      ) as string[]
      assert.ok(
        inImage.includes(`/app/app/${SHIPPED_SECRET}`) && inImage.includes('/app/app/service.js'),
        inImage.join(', '),
      )
      for (const f of EXCLUDED) assert.ok(!inImage.some((x) => x.endsWith(f)), `${f} not in the image`)
      // Every byte of every layer: no marker anywhere in the image.
      const saved = join(tempDir(), 'image.tar')
      await sh('podman', ['image', 'save', '--format', 'docker-archive', '-o', saved, image])
      const bytes = readFileSync(saved)
      for (const f of EXCLUDED) assert.equal(bytes.indexOf(markers.get(f)!), -1, `${f} content is not in any layer`)
      assert.notEqual(bytes.indexOf(markers.get(SHIPPED_SECRET)!), -1, 'the exactly included file is')
    } finally {
      await sh('podman', ['rmi', '-f', image]).catch(() => undefined)
      await sh('podman', ['rmi', '-f', base]).catch(() => undefined)
    }
  })
})
