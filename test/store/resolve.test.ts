import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { ModelStore } from '../../store/index.js'
import { tempDir, writeFile } from '../utils/tmp.js'

async function rejectsWith(
  p: Promise<unknown> | (() => unknown),
  code: string,
  message?: RegExp,
): Promise<BundleError> {
  try {
    await (typeof p === 'function' ? p() : p)
  } catch (err) {
    assert.ok(err instanceof BundleError, `expected BundleError, got ${err}`)
    assert.equal(err.code, code, err.message)
    if (message) assert.match(err.message, message)
    return err
  }
  assert.fail(`expected ${code}`)
}

describe('tag resolution on a real store', () => {
  let store: ModelStore
  // Made here, not in before(): a temp dir made inside a hook is removed when the hook ends.
  const dir = tempDir()
  before(async () => {
    store = ModelStore.open({ home: `${dir}/home` })
    const file = writeFile(dir, 'weights.bin', 'w')
    // Saved out of semver order on purpose: "latest" is by time, ranges by semver.
    for (const version of ['1.10.0', '1.2.0', '2.0.0-rc.1', '1.2.5', 'abc123', 'abd456', '0.9.0']) {
      await store.save({ name: 'det', version, paths: [file] })
      await new Promise((r) => setTimeout(r, 3)) // distinct creation times; a slower machine only widens the gap
    }
  })
  after(() => store.close())

  it('name and name:latest give the newest by creation time', () => {
    assert.equal(store.get('det').version, '0.9.0')
    assert.equal(store.get('det:latest').version, '0.9.0')
  })

  it('an exact version wins; a unique prefix resolves', () => {
    assert.equal(store.get('det:1.2.0').version, '1.2.0')
    assert.equal(store.get('det:abc').version, 'abc123')
    assert.equal(store.get('det:1.1').version, '1.10.0')
  })

  it('an ambiguous prefix is an error that lists the candidates', async () => {
    const err = await rejectsWith(() => store.get('det:ab'), 'E_STORE_TAG_AMBIGUOUS', /det:abc123/)
    assert.match(err.message, /det:abd456/)
    assert.deepEqual((err.details as { candidates: string[] }).candidates.sort(), ['det:abc123', 'det:abd456'])
  })

  it('name@range picks the highest matching semver, skipping prereleases unless asked', () => {
    assert.equal(store.get('det@^1.2').version, '1.10.0')
    assert.equal(store.get('det@~1.2').version, '1.2.5')
    assert.equal(store.get('det@<1.2.5').version, '1.2.0')
    assert.equal(store.get('det@>=1.0.0').version, '1.10.0')
    assert.equal(store.get('det@>=2.0.0-rc.0').version, '2.0.0-rc.1')
  })

  it('not found: unknown name, unknown version, unsatisfiable range', async () => {
    await rejectsWith(() => store.get('nope'), 'E_STORE_MODEL_NOT_FOUND', /no model named "nope"/)
    // A version that is not stored reads as not found, listing what is.
    await rejectsWith(
      () => store.get('det:3.0.0'),
      'E_STORE_MODEL_NOT_FOUND',
      new RegExp(
        /^model det:3\.0\.0 is not stored \(stored versions of "det": abd456, abc123, 2\.0\.0-rc\.1,/.source +
          / 1\.2\.5, 1\.2\.0, 1\.10\.0, 0\.9\.0\)$/.source,
      ),
    )
    await rejectsWith(() => store.get('det@^3'), 'E_STORE_MODEL_NOT_FOUND', /stored semver versions: .*1\.10\.0/)
  })

  it('prefix matching treats _ and % literally', async () => {
    const file = writeFile(tempDir(), 'f', 'x')
    await store.save({ name: 'lit', version: 'a_b', paths: [file] })
    await store.save({ name: 'lit', version: 'axb', paths: [file] })
    assert.equal(store.get('lit:a_').version, 'a_b')
  })
})
