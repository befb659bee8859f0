import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { generateVersion, parseTag, validateVersion } from '../../store/index.js'

const code = (fn: () => unknown): string => {
  try {
    fn()
  } catch (err) {
    assert.ok(err instanceof BundleError, `expected BundleError, got ${err}`)
    return err.code
  }
  assert.fail('expected an error')
}

describe('parseTag', () => {
  it('reads name, name:latest, name:version and name@range', () => {
    assert.deepEqual(parseTag('ocr-cls'), { name: 'ocr-cls', kind: 'latest' })
    assert.deepEqual(parseTag('ocr-cls:latest'), { name: 'ocr-cls', kind: 'latest' })
    assert.deepEqual(parseTag('ocr.cls_2:1.2.0-rc.1'), { name: 'ocr.cls_2', kind: 'version', version: '1.2.0-rc.1' })
    assert.deepEqual(parseTag('ocr-det@^1.2'), { name: 'ocr-det', kind: 'range', range: '^1.2' })
  })

  it('refuses upper case instead of lowering it, and suggests the lower-case tag', () => {
    try {
      parseTag('OCR:v1')
      assert.fail('no error')
    } catch (err) {
      assert.equal((err as BundleError).code, 'E_STORE_TAG_INVALID')
      assert.match((err as Error).message, /did you mean "ocr"/)
    }
    assert.equal(
      code(() => parseTag('ocr:V1')),
      'E_STORE_TAG_INVALID',
    )
  })

  it('refuses malformed names, versions and ranges', () => {
    for (const bad of [
      '',
      ' ',
      '-abc',
      'abc-',
      'a:-1',
      'a b',
      'a:b:c',
      'a:',
      ':v1',
      'a/b',
      'ab@',
      'ab@not a range!',
      'é',
      'a'.repeat(64),
      `a:${'1'.repeat(64)}`,
    ]) {
      assert.equal(
        code(() => parseTag(bad)),
        'E_STORE_TAG_INVALID',
        bad,
      )
    }
    assert.deepEqual(parseTag('a'.repeat(63)), { name: 'a'.repeat(63), kind: 'latest' })
  })

  it('reserves "latest" as a version', () => {
    assert.equal(
      code(() => validateVersion('latest', 'm')),
      'E_STORE_TAG_INVALID',
    )
  })
})

describe('generateVersion', () => {
  it('is 16 lower-case characters, a valid version, and sorts by creation time', () => {
    const a = generateVersion(Date.UTC(2026, 0, 1))
    const b = generateVersion(Date.UTC(2026, 0, 2))
    const c = generateVersion(Date.UTC(2031, 5, 9))
    for (const v of [a, b, c]) {
      assert.equal(v.length, 16)
      assert.equal(validateVersion(v), v)
    }
    assert.ok(a < b && b < c)
  })

  it('stays strictly increasing within one millisecond', () => {
    const t = Date.UTC(2040, 0, 1)
    const vs = Array.from({ length: 500 }, () => generateVersion(t))
    for (let i = 1; i < vs.length; i++) assert.ok(vs[i - 1]! < vs[i]!, `${vs[i - 1]} < ${vs[i]}`)
  })
})
