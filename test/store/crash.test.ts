import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { openSync, closeSync, ftruncateSync, readdirSync, statSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ModelStore } from '../../store/index.js'
import { BIN } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

const SIZE = 192 * 1024 * 1024

/** A large file; mostly a hole so the test does not spend its time writing it. */
function bigFile(path: string): string {
  const fd = openSync(path, 'w')
  ftruncateSync(fd, SIZE)
  writeSync(fd, Buffer.from('distinct header'), 0, 15, 0)
  closeSync(fd)
  return path
}

function partialBytes(home: string): number {
  try {
    return readdirSync(join(home, 'tmp'))
      .filter((n) => n.endsWith('.part'))
      .reduce((n, f) => {
        try {
          return n + statSync(join(home, 'tmp', f)).size
        } catch {
          return n
        }
      }, 0)
  } catch {
    return 0
  }
}

describe('a save killed mid-way', () => {
  it('SIGKILL while copying a large model leaves no entry and verify clean', { timeout: 120_000 }, async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    const file = bigFile(join(dir, 'big.bin'))
    const child = spawn(process.execPath, [BIN, 'models', 'save', file, '--name', 'big'], {
      env: { ...process.env, BUNDLE_HOME: home },
      stdio: 'ignore',
    })
    const exited = new Promise((r) => child.on('exit', r))
    // Kill once the copy is underway, not before it started and not after it finished.
    let seen = 0
    for (let i = 0; i < 2000 && seen < 8 * 1024 * 1024; i++) {
      seen = partialBytes(home)
      await sleep(2)
    }
    assert.ok(seen > 0 && seen < SIZE, `caught the save mid-copy (${seen} bytes staged)`)
    child.kill('SIGKILL')
    await exited

    const store = ModelStore.open({ home })
    assert.deepEqual(store.list(), [])
    const report = await store.verify()
    assert.equal(report.ok, true)
    assert.equal(report.garbage.tempFiles, 1, 'the half-written temp file is counted as garbage')
    await store.gc()
    assert.deepEqual((await store.verify()).garbage, { blobs: 0, tempFiles: 0, staleLeases: 0, checkouts: 0 })
    assert.deepEqual(readdirSync(join(home, 'tmp')), [])
    store.close()
  })

  it('SIGKILL at random moments of a save: the model is either complete or absent, verify always clean', {
    timeout: 180_000,
  }, async () => {
    const dir = tempDir()
    const home = join(dir, 'home')
    const file = bigFile(join(dir, 'big.bin'))
    let complete = 0
    for (const delay of [150, 400, 700, 1000, 1500, 2500]) {
      const child = spawn(process.execPath, [BIN, 'models', 'save', file, '--name', 'big', '--version', `v${delay}`], {
        env: { ...process.env, BUNDLE_HOME: home },
        stdio: 'ignore',
      })
      const exited = new Promise((r) => child.on('exit', r))
      await sleep(delay)
      child.kill('SIGKILL')
      await exited
      const store = ModelStore.open({ home })
      const found = store.list({ name: 'big' }).find((m) => m.version === `v${delay}`)
      if (found) {
        complete++
        assert.equal(found.size, SIZE)
        assert.equal((await store.paths(found.tag)).model.digest, found.digest)
      }
      assert.equal((await store.verify()).ok, true, `verify after a kill at ${delay} ms`)
      store.close()
    }
    const store = ModelStore.open({ home })
    await store.gc()
    const final = await store.verify()
    assert.equal(final.ok, true)
    assert.deepEqual(final.garbage, { blobs: 0, tempFiles: 0, staleLeases: 0, checkouts: 0 })
    assert.equal(store.list().length, complete)
    store.close()
  })
})
