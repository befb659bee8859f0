import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { ModelStore } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

// `bundle models import` and `bundle build` SIGKILLed at moments spread over their run: after
// each kill the store verifies clean, holds the thing complete or not at all, and `gc` leaves
// nothing behind (the temp area empty, no unreferenced blob, no lease).

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

/** What decides the moment of the kill: a delay in ms, or a test on the store's temp area. */
type Moment = number | ((tmp: string[]) => boolean)

/**
 * Runs `bundle ARGS` and SIGKILLs it at `moment` (if it is still running); resolves with its exit code (null if
 * killed).
 */
async function killedAt(args: string[], home: string, moment: Moment): Promise<number | null> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, BUNDLE_HOME: home }, stdio: 'ignore' })
  let done = false
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => ((done = true), r(code))))
  if (typeof moment === 'number') await sleep(moment)
  else {
    const tmp = join(home, 'tmp')
    while (!done) {
      let entries: string[] = []
      try {
        entries = readdirSync(tmp)
      } catch {
        // not created yet
      }
      if (moment(entries)) break
      await sleep(1)
    }
  }
  child.kill('SIGKILL')
  return exited
}

const named = (m: Moment) => (typeof m === 'number' ? `${m} ms into` : 'at a staged moment of')

/** Asserts verify is ok and gc leaves nothing; returns how many temp entries the kill had left. */
async function assertClean(home: string, when: string): Promise<number> {
  const store = ModelStore.open({ home })
  try {
    const report = await store.verify()
    assert.equal(report.ok, true, `verify after a kill ${when}: ${JSON.stringify(report)}`)
    await store.gc()
    const after = await store.verify()
    assert.deepEqual(
      after.garbage,
      { blobs: 0, tempFiles: 0, staleLeases: 0, checkouts: 0 },
      `gc reclaims what the kill ${when} left`,
    )
    assert.deepEqual(readdirSync(store.layout.tmp), [], `the temp area is empty after gc (kill ${when})`)
    return report.garbage.tempFiles
  } finally {
    store.close()
  }
}

describe('store: SIGKILL during import and build', () => {
  it('models import: the model is complete or absent after every kill, and the store verifies clean', {
    timeout: 240_000,
  }, async () => {
    const dir = tempDir()
    // Random content, so the archive does not compress to nothing and the import takes a while.
    const file = join(dir, 'weights.bin')
    writeFileSync(file, randomBytes(48 * 1024 * 1024))
    const source = ModelStore.open({ home: join(dir, 'source') })
    const saved = await source.save({ name: 'big', version: '1.0.0', paths: [file] })
    await source.export(saved.tag, join(dir, 'big.bundlemodel'))
    source.close()

    const home = join(dir, 'home')
    let complete = 0
    let staged = 0
    // While blobs are being written, then at moments spread over the whole run.
    const moments: Moment[] = [(tmp) => tmp.some((n) => n.endsWith('.part')), 150, 350, 600, 900, 1300, 2000, 4000]
    for (const ms of moments) {
      const code = await killedAt(['models', 'import', join(dir, 'big.bundlemodel')], home, ms)
      const store = ModelStore.open({ home })
      const found = store.list({ name: 'big' })
      if (found.length > 0) {
        complete++
        assert.equal(found[0]!.digest, saved.digest, 'an imported model is the exported one, whole')
        store.delete(['big']) // the next round imports again
      }
      store.close()
      staged += await assertClean(home, `${named(ms)} an import (exit ${code})`)
    }
    assert.ok(
      staged > 0,
      `at least one kill caught an import with files staged (${complete} of ${moments.length} imports completed)`,
    )
  })

  it('bundle build: the bundle is complete or absent after every kill, and the store verifies clean', {
    timeout: 300_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    let complete = 0
    let staged = 0
    // Its phases: the models it needs are imported (blobs staged as .part files), then the
    // bundle is assembled in a staging directory (.build) and its files stored; the first two
    // kills land in those, the rest at moments spread over a run of about 1.5 s.
    const moments: Moment[] = [
      (tmp) => tmp.some((n) => n.endsWith('.build')),
      (tmp) => tmp.some((n) => n.endsWith('.build')) && tmp.some((n) => n.endsWith('.part')),
      250,
      500,
      750,
      1000,
      1250,
      1500,
      3000,
    ]
    for (const ms of moments) {
      const code = await killedAt(['build', QUICKSTART, '--version', `1.0.${moments.indexOf(ms)}`], home, ms)
      const listed = JSON.parse((await bundle(['list', '-o', 'json'], { BUNDLE_HOME: home })).stdout || '[]') as {
        tag: string
      }[]
      for (const b of listed) {
        const dir = await bundle(['get', b.tag, '-o', 'path'], { BUNDLE_HOME: home })
        assert.equal(dir.code, 0, `a listed bundle can be checked out: ${dir.stderr}`)
        complete++
        assert.equal((await bundle(['delete', b.tag, '-y'], { BUNDLE_HOME: home })).code, 0)
      }
      staged += await assertClean(home, `${named(ms)} a build (exit ${code})`)
    }
    assert.ok(
      staged > 0,
      `at least one kill caught a build with files staged (${complete} of ${moments.length} builds completed)`,
    )
    // And after all that, a build still works and yields a loadable bundle.
    const ok = await bundle(['build', QUICKSTART], { BUNDLE_HOME: home })
    assert.equal(ok.code, 0, ok.stderr)
  })
})
