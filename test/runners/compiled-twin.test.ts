import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { compiledTwin } from '../../runners/pool/backend.js'
import { tempDir } from '../utils/tmp.js'

// Workers started from source load their files from dist/ only when the test run says dist/ is
// current (BUNDLE_WORKERS_FROM, set by scripts/test.mjs), and only files that have a twin there.

describe('compiledTwin', () => {
  const root = tempDir()
  mkdirSync(join(root, 'dist', 'runners', 'pool'), { recursive: true })
  writeFileSync(join(root, 'dist', 'runners', 'pool', 'worker-entry.js'), '')
  const source = join(root, 'runners', 'pool', 'worker-entry.ts')

  function withEnv<T>(value: string | undefined, fn: () => T): T {
    const before = process.env.BUNDLE_WORKERS_FROM
    if (value === undefined) delete process.env.BUNDLE_WORKERS_FROM
    else process.env.BUNDLE_WORKERS_FROM = value
    try {
      return fn()
    } finally {
      if (before === undefined) delete process.env.BUNDLE_WORKERS_FROM
      else process.env.BUNDLE_WORKERS_FROM = before
    }
  }

  it('answers the .js at the same place under dist/ when the run names dist/', () => {
    const twin = withEnv(join(root, 'dist'), () => compiledTwin(source))
    assert.equal(twin, join(root, 'dist', 'runners', 'pool', 'worker-entry.js'))
  })

  it('answers nothing without the variable, without a twin, or for a file outside the project', () => {
    assert.equal(
      withEnv(undefined, () => compiledTwin(source)),
      undefined,
    )
    const dist = join(root, 'dist')
    assert.equal(
      withEnv(dist, () => compiledTwin(join(root, 'runners', 'pool', 'shm.ts'))),
      undefined,
    )
    assert.equal(
      withEnv(dist, () => compiledTwin(join(tempDir(), 'runners', 'pool', 'worker-entry.ts'))),
      undefined,
    )
    assert.equal(
      withEnv(dist, () => compiledTwin(join(root, 'runners', 'pool', 'worker-entry.js'))),
      undefined,
    )
  })
})
