import assert from 'node:assert/strict'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import pino from 'pino'
import { LogSink } from '../../framework/server/log-sink.js'
import { tempDir } from '../utils/tmp.js'

// The server log's buffered destination: every line arrives, in order, once flushed — across
// many 64 KiB chunks written while more lines keep coming.
describe('LogSink', () => {
  it('writes every line in order, through pino, and flush(cb) calls back once all is written', async () => {
    const file = join(tempDir(), 'log.jsonl')
    const fd = openSync(file, 'w')
    const sink = new LogSink(fd)
    const log = pino({ base: null, timestamp: false }, sink)
    const N = 20_000
    for (let i = 0; i < N; i++) {
      log.info({ i, pad: 'x'.repeat(i % 50) }, 'line')
      // Some flushes while earlier chunks are still being written.
      if (i % 3_000 === 0) sink.flush()
    }
    log.info({ i: N, text: 'ünïcödé ✓' }, 'last')
    await new Promise<void>((resolve) => log.flush(() => resolve()))
    sink.end()
    closeSync(fd)
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; text?: string })
    assert.equal(lines.length, N + 1)
    assert.ok(
      lines.every((l, k) => l.i === k),
      'in order, none lost',
    )
    assert.equal(lines.at(-1)!.text, 'ünïcödé ✓')
  })

  it('flush(cb) with nothing buffered calls back at once', async () => {
    const sink = new LogSink(openSync('/dev/null', 'w'))
    await new Promise<void>((resolve) => sink.flush(resolve))
    sink.end()
  })
})
