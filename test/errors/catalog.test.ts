import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { BundleError, CATALOG, errorCodes } from '../../errors/index.js'

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
const documented = new Map(
  [...doc.matchAll(/^\|\s*`(E_[A-Z_]+)`\s*\|\s*(\d{3})\s*\|\s*(\d)\s*\|/gm)].map((m) => [
    m[1]!,
    { status: Number(m[2]), exit: Number(m[3]) },
  ]),
)

describe('error catalog', () => {
  it('docs/errors.md lists every code with the same status and exit code, and nothing else', () => {
    assert.deepEqual([...documented.keys()].sort(), errorCodes().sort())
    for (const code of errorCodes())
      assert.deepEqual(documented.get(code), { status: CATALOG[code].status, exit: CATALOG[code].exit }, code)
  })

  it('a BundleError takes status, exit code and fix from the catalog', () => {
    const err = new BundleError('E_STORE_TAG_EXISTS', 'm:1 exists')
    assert.equal(err.status, 409)
    assert.equal(err.exitCode, 1)
    assert.equal(err.fix, CATALOG.E_STORE_TAG_EXISTS.fix)
    assert.deepEqual(err.toJSON(), { code: 'E_STORE_TAG_EXISTS', message: 'm:1 exists' })
  })
})
