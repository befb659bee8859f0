import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createGzip } from 'node:zlib'
import { createWriteStream } from 'node:fs'
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { BundleError } from '../../errors/index.js'
import { ModelStore } from '../../store/index.js'
import { goodArchive, gzip, makeTar, manifest, type FileSpec } from '../utils/archive.js'
import { snapshot, tempDir, writeFile } from '../utils/tmp.js'

const weights: FileSpec = { path: 'weights.bin', body: 'real weights' }
const m = (overrides: Record<string, unknown> = {}) => ({ path: 'manifest.json', body: manifest([weights], overrides) })

describe('archive import refuses hostile archives and changes nothing', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const outside = join(dir, 'outside')
  let store: ModelStore
  let before_: Record<string, number>

  before(async () => {
    store = ModelStore.open({ home })
    await store.save({ name: 'keeper', version: '1.0.0', paths: [writeFile(dir, 'keep.bin', 'keep me')] })
    mkdirSync(join(dir, 'archives'))
    before_ = snapshot(dir, ['home', 'archives'])
  })
  after(() => store.close())

  async function refused(
    name: string,
    archive: Buffer,
    code: string,
    options: { maxBytes?: number } = {},
  ): Promise<void> {
    const file = join(dir, 'archives', `${name}.bundlemodel`)
    writeFileSync(file, archive)
    const listBefore = store.list().map((x) => `${x.tag} ${x.digest}`)
    const blobsBefore = snapshot(join(home, 'blobs'))
    await assert.rejects(store.import(file, options), (err: unknown) => {
      assert.ok(err instanceof BundleError, `${name}: expected BundleError, got ${(err as Error)?.stack}`)
      assert.equal(err.code, code, `${name}: ${err.message}`)
      return true
    })
    assert.deepEqual(
      store.list().map((x) => `${x.tag} ${x.digest}`),
      listBefore,
      `${name}: index changed`,
    )
    assert.deepEqual(snapshot(join(home, 'blobs')), blobsBefore, `${name}: blobs changed`)
    assert.deepEqual(readdirSync(join(home, 'tmp')), [], `${name}: temp area not cleaned`)
    assert.deepEqual(snapshot(dir, ['home', 'archives']), before_, `${name}: something was written outside the store`)
    assert.equal(existsSync(outside), false)
    assert.equal((await store.verify()).ok, true)
  }

  it('path traversal in an entry', () =>
    refused(
      'traversal',
      gzip(makeTar([m(), { path: 'files/../../outside', body: 'pwned' }])),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('path traversal in the manifest', () =>
    refused(
      'manifest-traversal',
      gzip(
        makeTar([
          { path: 'manifest.json', body: manifest([{ path: '../../outside', body: 'x' }]) },
          { path: 'files/../../outside', body: 'x' },
        ]),
      ),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('absolute path', () =>
    refused('absolute', gzip(makeTar([m(), { path: outside, body: 'pwned' }])), 'E_ARCHIVE_UNSAFE_ENTRY'))
  it('symlink', () =>
    refused(
      'symlink',
      gzip(makeTar([m(), { path: 'files/weights.bin', type: 'SymbolicLink', linkpath: '/etc/passwd' }])),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('hard link', () =>
    refused(
      'hardlink',
      gzip(makeTar([m(), { path: 'files/weights.bin', type: 'Link', linkpath: 'manifest.json' }])),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('character device', () =>
    refused(
      'chardev',
      gzip(makeTar([m(), { path: 'files/weights.bin', type: 'CharacterDevice' }])),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('fifo', () =>
    refused('fifo', gzip(makeTar([m(), { path: 'files/weights.bin', type: 'FIFO' }])), 'E_ARCHIVE_UNSAFE_ENTRY'))
  it('duplicate names', () =>
    refused(
      'duplicate',
      gzip(
        makeTar([
          m(),
          { path: 'files/weights.bin', body: weights.body },
          { path: 'files/weights.bin', body: weights.body },
        ]),
      ),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('entry not in the manifest', () =>
    refused(
      'extra',
      gzip(makeTar([m(), { path: 'files/weights.bin', body: weights.body }, { path: 'files/extra.bin', body: 'x' }])),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('checksum mismatch (same size)', () =>
    refused(
      'checksum',
      gzip(makeTar([m(), { path: 'files/weights.bin', body: 'fake weights' }])),
      'E_ARCHIVE_CHECKSUM',
    ))
  it('size mismatch', () =>
    refused(
      'size',
      gzip(makeTar([m(), { path: 'files/weights.bin', body: 'much longer fake weights' }])),
      'E_ARCHIVE_CHECKSUM',
    ))
  it('model digest that does not match its files', () =>
    refused(
      'digest',
      gzip(makeTar([m({ digest: `sha256:${'0'.repeat(64)}` }), { path: 'files/weights.bin', body: weights.body }])),
      'E_ARCHIVE_CHECKSUM',
    ))
  it('file listed but missing', () => refused('missing', gzip(makeTar([m()])), 'E_ARCHIVE_CORRUPT'))
  it('manifest not first', () =>
    refused(
      'order',
      gzip(makeTar([{ path: 'files/weights.bin', body: weights.body }, m()])),
      'E_ARCHIVE_MANIFEST_INVALID',
    ))
  it('manifest not JSON', () =>
    refused('badjson', gzip(makeTar([{ path: 'manifest.json', body: '{nope' }])), 'E_ARCHIVE_MANIFEST_INVALID'))
  it('manifest with a name no model may have', () =>
    refused(
      'badname',
      gzip(makeTar([m({ name: 'evil/../x' }), { path: 'files/weights.bin', body: weights.body }])),
      'E_ARCHIVE_MANIFEST_INVALID',
    ))
  it('a path that is both a file and a directory', () =>
    refused(
      'file-and-dir',
      gzip(
        makeTar([
          {
            path: 'manifest.json',
            body: manifest([
              { path: 'a', body: 'x' },
              { path: 'a/b', body: 'y' },
            ]),
          },
          { path: 'files/a', body: 'x' },
          { path: 'files/a/b', body: 'y' },
        ]),
      ),
      'E_ARCHIVE_UNSAFE_ENTRY',
    ))
  it('not gzip', () => refused('notgzip', Buffer.from('this is not an archive at all'), 'E_ARCHIVE_CORRUPT'))
  it('truncated file', () => {
    const good = goodArchive([
      { path: 'big.bin', body: Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 31) % 251)) },
    ])
    return refused('truncated', good.subarray(0, Math.floor(good.length / 2)), 'E_ARCHIVE_CORRUPT')
  })
  it('declared size over the import limit', () =>
    refused('toolarge', goodArchive([{ path: 'a.bin', body: Buffer.alloc(4096) }]), 'E_ARCHIVE_TOO_LARGE', {
      maxBytes: 1024,
    }))

  it('gzip bomb: gigabytes of zeros behind a tiny manifest stop at the declared size', async () => {
    // 256 MiB of zeros compress to ~250 KiB; import must stop long before writing them anywhere.
    const file = join(dir, 'bomb.bundlemodel')
    const head = makeTar([m(), { path: 'files/weights.bin', body: weights.body }], Buffer.alloc(0))
    async function* body() {
      yield head
      const zeros = Buffer.alloc(1024 * 1024)
      for (let i = 0; i < 256; i++) yield zeros
    }
    await pipeline(Readable.from(body()), createGzip(), createWriteStream(file))
    const started = Date.now()
    await assert.rejects(store.import(file), (err: BundleError) => err.code === 'E_ARCHIVE_TOO_LARGE')
    assert.ok(Date.now() - started < 5000, 'the bomb was not expanded to the end')
    assert.deepEqual(readdirSync(join(home, 'tmp')), [])
    assert.deepEqual(
      store.list().map((x) => x.tag),
      ['keeper:1.0.0'],
    )
  })

  it('the same well-formed archive imports fine (the checks are not over-eager)', async () => {
    const file = join(dir, 'good.bundlemodel')
    writeFileSync(file, goodArchive([weights, { path: 'sub/dir/vocab.txt', body: 'a\nb\n' }]))
    const r = await store.import(file)
    assert.equal(r.status, 'imported')
    assert.deepEqual(
      r.model.files.map((f) => f.path),
      ['sub/dir/vocab.txt', 'weights.bin'],
    )
    store.delete(['evil'])
  })
})
