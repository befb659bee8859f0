import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { parse } from 'yaml'
import { bundle } from '../utils/cli.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// bundle tune on the quickstart with a small budget, as the README runs it: it serves candidate
// settings, reports what it tried and the top three, stays within its budget, and writes a
// config file that bundle serve accepts and runs with.

describe('bundle tune', () => {
  it('tunes the quickstart runner within its budget and writes a config bundle serve runs with', {
    timeout: 240_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const out = join(tempDir(), 'serve.yaml')
    const began = Date.now()
    const r = await bundle(
      ['tune', 'examples/quickstart', '--runner', 'ocr-cls', '--p99', '250', '--budget', '1.5'].concat([
        '--concurrency',
        '2:8:x2',
        '-o',
        out,
      ]),
      { BUNDLE_HOME: home },
    )
    const seconds = (Date.now() - began) / 1000
    assert.equal(r.code, 0, r.stderr)
    assert.ok(seconds <= 90 + 15, `a 1.5-minute budget took ${seconds} s`)
    assert.match(r.stderr, /^trial 1 \(0m\d\ds of 1.5m\): workers=1 threads=auto batch=32 window=10ms process: /m)
    assert.match(r.stdout, /^Tried \((\d+), in order/m)
    const tried = Number(/^Tried \((\d+)/m.exec(r.stdout)![1])
    assert.ok(tried >= 3, `${tried} candidates in 1.5 minutes`)
    assert.match(
      r.stdout,
      /\nTop three:\nworkers +threads +batch +window ms +isolation +goodput\/s +p99 ms +at c +meets\n/,
    )
    const best = Number(/^Best: .*: ([\d.]+)\/s/m.exec(r.stdout)![1])
    const before = Number(/^Now: .*: ([\d.]+)\/s/m.exec(r.stdout)![1])
    assert.ok(best >= before, `the best (${best}/s) measured at least as well as the settings before (${before}/s)`)

    const file = readFileSync(out, 'utf8')
    assert.match(file, /^# bundle tune examples\/quickstart --runner ocr-cls --p99 250/)
    const chosen = parse(file).runners['ocr-cls']
    const s = await serveReady('examples/quickstart', ['--config', out], { BUNDLE_HOME: home })
    try {
      const [runner] = (await (await fetch(`${s.url}/runners`)).json()) as any[]
      assert.equal(runner.config.workers, chosen.workers)
      assert.equal(runner.config.isolation, chosen.isolation)
      assert.equal(runner.config.batching.maxBatchSize, chosen.batching.maxBatchSize)
      assert.equal(runner.config.batching.maxDelayMs, chosen.batching.maxDelayMs)
    } finally {
      await s.stop('SIGTERM')
    }
  })

  it('an unknown runner or a bad bound is a usage error that says what to write', { timeout: 120_000 }, async () => {
    const home = join(tempDir(), 'home')
    const bad = await bundle(['tune', 'examples/quickstart', '--runner', 'nope', '--budget', '1'], {
      BUNDLE_HOME: home,
    })
    assert.equal(bad.code, 2, bad.stderr)
    assert.match(bad.stderr, /^error E_CLI_USAGE: --runner nope: the service has no such runner \(it has ocr-cls\)/m)
    const p99 = await bundle(['tune', 'examples/quickstart', '--runner', 'ocr-cls', '--p99', 'fast'])
    assert.equal(p99.code, 2)
    assert.match(p99.stderr, /--p99 "fast" must be a positive number/)
  })
})
