import assert from 'node:assert/strict'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { Parser } from 'tar'
import { createHash } from 'node:crypto'
import { ModelStore } from '../../store/index.js'
import { gzip, makeTar, type RawEntry } from '../utils/archive.js'
import { bundle } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import { tempDir } from '../utils/tmp.js'

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

/** The entries of a gzip tar, in order. */
function entriesOf(file: string): { path: string; body: Buffer }[] {
  const out: { path: string; body: Buffer }[] = []
  const parser = new Parser({
    onReadEntry: (e) => {
      const chunks: Buffer[] = []
      e.on('data', (c: Buffer) => chunks.push(c))
      e.on('end', () => out.push({ path: e.path, body: Buffer.concat(chunks) }))
    },
  })
  parser.end(gunzipSync(readFileSync(file)))
  return out
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

/** Store contents that must not change when an import is refused. */
function state(home: string): { bundles: number; models: string[] } {
  const store = ModelStore.open({ home })
  try {
    return { bundles: store.bundles.list().length, models: store.list().map((m) => m.tag) }
  } finally {
    store.close()
  }
}

describe('bundle export / import', () => {
  it('exports the bundle with its models to identical bytes; imports into another store with the same digest, once', {
    timeout: 180_000,
  }, async () => {
    const a = join(tempDir(), 'a')
    const b = join(tempDir(), 'b')
    const out = tempDir()
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], { BUNDLE_HOME: a })).code, 0)
    const e1 = await bundle(['export', 'quickstart:1.0.0', out], { BUNDLE_HOME: a })
    assert.equal(e1.code, 0, e1.stderr)
    const file = join(out, 'quickstart-1.0.0.bundle')
    const second = join(out, 'second.bundle')
    assert.equal((await bundle(['export', 'quickstart:1.0.0', second], { BUNDLE_HOME: a })).code, 0)
    assert.ok(readFileSync(file).equals(readFileSync(second)), 'deterministic export')
    // A directory that does not exist is an error, not a file named like it.
    const missing = join(out, 'no-such-dir')
    const bad = await bundle(['export', 'quickstart:1.0.0', `${missing}/`], { BUNDLE_HOME: a })
    assert.equal(bad.code, 1)
    assert.match(bad.stderr, /^error E_EXPORT_DIR_NOT_FOUND: .*no-such-dir/)
    assert.ok(!existsSync(missing))
    assert.deepEqual(
      entriesOf(file).map((e) => e.path.split('/')[0]),
      // bundle.json, openapi.json, README.md, Dockerfile, package.json, sbom.cdx.json, the compiled service
      ['bundle-archive.json', 'files', 'files', 'files', 'files', 'files', 'files', 'files', 'models'],
    )

    const imp = await bundle(['import', file], { BUNDLE_HOME: b })
    assert.equal(imp.code, 0, imp.stderr)
    assert.equal(imp.stdout, 'imported model ocr-cls:2.0.0\nimported quickstart:1.0.0\n')
    const digest = (home: string) =>
      bundle(['get', 'quickstart:1.0.0', '-o', 'json'], { BUNDLE_HOME: home }).then(
        (r) => (JSON.parse(r.stdout) as { digest: string }).digest,
      )
    assert.equal(await digest(b), await digest(a))
    const again = await bundle(['import', file], { BUNDLE_HOME: b })
    // One wording for models and bundles alike.
    assert.match(
      again.stdout,
      /^already present: model ocr-cls:2\.0\.0\nalready present: quickstart:1\.0\.0 \(sha256:[0-9a-f]{64}\)\n$/,
    )
    assert.equal((await bundle(['models', 'verify'], { BUNDLE_HOME: b })).code, 0)
  })

  it('a tampered, hostile or truncated archive is refused and leaves the store as it was', {
    timeout: 180_000,
  }, async () => {
    const a = join(tempDir(), 'a')
    const dir = tempDir()
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], { BUNDLE_HOME: a })).code, 0)
    assert.equal((await bundle(['export', 'quickstart:1.0.0', dir], { BUNDLE_HOME: a })).code, 0)
    const good = entriesOf(join(dir, 'quickstart-1.0.0.bundle'))
    const manifest = JSON.parse(good[0]!.body.toString()) as {
      models: { entry: string; sha256: string; size: number; tag: string; digest: string }[]
    }
    // Another model's archive, declared consistently, under the pinned model's entry.
    const other = join(tempDir(), 'o')
    const otherStore = ModelStore.open({ home: other })
    await otherStore.save({ name: 'ocr-cls', version: '2.0.0', paths: [MODELS.rec] })
    const swapped = join(dir, 'swapped.bundlemodel')
    await otherStore.export('ocr-cls:2.0.0', swapped)
    otherStore.close()
    const swappedBody = readFileSync(swapped)
    const swapManifest = {
      ...manifest,
      models: manifest.models.map((m) => ({ ...m, sha256: sha(swappedBody), size: swappedBody.length })),
    }

    const cases: [string, RawEntry[], RegExp][] = [
      [
        'altered file',
        good.map((e) =>
          e.path === 'files/app/service.js'
            ? { path: e.path, body: Buffer.concat([e.body.subarray(0, -1), Buffer.from('!')]) }
            : e,
        ),
        /E_ARCHIVE_CHECKSUM/,
      ],
      ['path traversal', [...good, { path: '../evil.js', body: 'x' }], /E_ARCHIVE_UNSAFE_ENTRY/],
      [
        'symbolic link',
        [...good.slice(0, 2), { path: 'files/link', type: 'SymbolicLink', linkpath: '/etc/passwd' }, ...good.slice(2)],
        /E_ARCHIVE_UNSAFE_ENTRY/,
      ],
      [
        'model swapped',
        [
          { path: good[0]!.path, body: JSON.stringify(swapManifest) },
          ...good.slice(1, -1),
          { path: good.at(-1)!.path, body: swappedBody },
        ],
        /E_ARCHIVE_CHECKSUM/,
      ],
      ['model missing', good.slice(0, -1), /E_ARCHIVE_CORRUPT/],
    ]
    for (const [name, entries, code] of cases) {
      const home = join(tempDir(), 'b')
      const file = join(dir, `${name.replace(/ /g, '-')}.bundle`)
      writeFileSync(file, gzip(makeTar(entries)))
      const r = await bundle(['import', file], { BUNDLE_HOME: home })
      assert.equal(r.code, 1, `${name}: ${r.stdout}`)
      assert.match(r.stderr, code, name)
      assert.deepEqual(
        state(home),
        { bundles: 0, models: [] },
        `${name}: nothing stored (models it imported are removed again)`,
      )
      const verify = await bundle(['models', 'verify', '-o', 'json'], { BUNDLE_HOME: home })
      assert.equal(verify.code, 0, `${name}: ${verify.stdout}`)
    }
    const truncated = join(dir, 'truncated.bundle')
    writeFileSync(truncated, readFileSync(join(dir, 'quickstart-1.0.0.bundle')).subarray(0, 20_000))
    const home = join(tempDir(), 'c')
    const r = await bundle(['import', truncated], { BUNDLE_HOME: home })
    assert.equal(r.code, 1)
    assert.match(r.stderr, /E_ARCHIVE_CORRUPT/)
    assert.deepEqual(state(home), { bundles: 0, models: [] })
  })
})
