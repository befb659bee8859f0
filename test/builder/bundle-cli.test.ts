import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

describe('bundle list/get/delete as a user scripts them', () => {
  it('delete --all-versions removes every version of a bundle, like models delete; -o yaml has no anchors', {
    timeout: 180_000,
  }, async () => {
    const env = { BUNDLE_HOME: join(tempDir(), 'home') }
    for (const v of ['1.0.0', '1.1.0']) assert.equal((await bundle(['build', QUICKSTART, '--version', v], env)).code, 0)

    // The manifest's models and the bundle's are the same objects: YAML must write both out.
    const yaml = await bundle(['get', 'quickstart:1.1.0', '-o', 'yaml'], env)
    assert.equal(yaml.code, 0, yaml.stderr)
    assert.doesNotMatch(yaml.stdout, /[&*]a\d+\b/, 'no YAML anchors or aliases')
    assert.equal(
      (yaml.stdout.match(/tag: ocr-cls:2\.0\.0/g) ?? []).length,
      2,
      'the pinned model is written out in both places',
    )

    const latestOnly = await bundle(['delete', 'quickstart', '-y'], env)
    assert.equal(latestOnly.stdout, 'deleted quickstart:1.1.0\n')
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.2.0'], env)).code, 0)
    const all = await bundle(['delete', 'quickstart', '--all-versions', '-y'], env)
    assert.equal(all.code, 0, all.stderr)
    assert.deepEqual(all.stdout.trim().split('\n').sort(), ['deleted quickstart:1.0.0', 'deleted quickstart:1.2.0'])
    assert.deepEqual(JSON.parse((await bundle(['list', '-o', 'json'], env)).stdout), [])
    const none = await bundle(['delete', 'quickstart', '--all-versions', '-y'], env)
    assert.equal(none.code, 1)
    assert.match(none.stderr, /^error E_BUNDLE_NOT_FOUND: no bundle named "quickstart" is stored\n$/)
    // Its models are free to go now.
    assert.equal((await bundle(['models', 'delete', 'ocr-cls', '--all-versions', '-y'], env)).code, 0)
  })
})
