import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { ortSeverity, parseOutputLine } from '../../runners/pool/worker-output.js'
import { BIN } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { childrenOf } from '../utils/procs.js'
import { untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'
import { saveNegModel } from '../utils/v2-models.js'

// What workers write (onnxruntime's C++ logger, a custom runner's console) reaches the server's
// logger as records of its own: stdout stays one JSON object per line.

const SERVICE = fileURLToPath(new URL('../fixtures/chatty-runner/service.ts', import.meta.url))

describe("workers' output lines", () => {
  it("reads onnxruntime's lines at their own severity, colour codes gone; other lines by stream", () => {
    const warn =
      '\u001b[0;93m2026-12-05 18:41:04.073636679 [W:onnxruntime:onnxruntime-node, telemetry.cc:470 Initialize] ' +
      'No readable CA bundle was found; telemetry HTTPS uploads will be unavailable\u001b[m'
    assert.deepEqual(parseOutputLine(warn, 'stderr'), {
      level: 'warn',
      source: 'onnxruntime',
      message: 'No readable CA bundle was found; telemetry HTTPS uploads will be unavailable',
      at: 'telemetry.cc:470 Initialize',
    })
    const info = '2026-12-05 18:42:43.511807383 [I:onnxruntime:, inference_session.cc:2610 Initialize] Initializing.'
    assert.deepEqual(parseOutputLine(info, 'stdout'), {
      level: 'info',
      source: 'onnxruntime',
      message: 'Initializing.',
      at: 'inference_session.cc:2610 Initialize',
    })
    assert.equal(parseOutputLine('2026-01-01 00:00:00.1 [E:onnxruntime:x, a.cc:1 f] boom', 'stderr')?.level, 'error')
    assert.equal(parseOutputLine('2026-01-01 00:00:00.1 [V:onnxruntime:x, a.cc:1 f] v', 'stderr')?.level, 'debug')
    assert.deepEqual(parseOutputLine('hello', 'stdout'), { level: 'info', source: 'stdout', message: 'hello' })
    assert.deepEqual(parseOutputLine('oops  ', 'stderr'), { level: 'warn', source: 'stderr', message: 'oops' })
    assert.equal(parseOutputLine('  ', 'stdout'), undefined)
  })

  it("sets onnxruntime's severity from the server's log level, or BUNDLE_ORT_LOG_LEVEL", () => {
    assert.deepEqual(
      ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent', undefined].map((l) => ortSeverity(l)),
      [0, 1, 2, 2, 3, 4, 4, 2],
    )
    assert.equal(ortSeverity('info', 'verbose'), 0)
    assert.equal(ortSeverity('debug', 'ERROR'), 3)
    assert.equal(ortSeverity('debug', ''), 1)
    assert.throws(
      () => ortSeverity('debug', 'loud'),
      (e: { code?: string; message: string }) =>
        e.code === 'E_SERVE_CONFIG_INVALID' && /BUNDLE_ORT_LOG_LEVEL must be one of verbose, info/.test(e.message),
    )
  })
})

describe('bundle serve: workers log through the server', () => {
  const home = join(tempDir(), 'home')

  /** Serves the fixture at `level`, calls it once, stops it; what it wrote, and its workers' environments. */
  const serve = async (level: string) => {
    const child = spawn(process.execPath, [BIN, 'serve', SERVICE, '--port', '0'], {
      env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0', BUNDLE_LOG_LEVEL: level },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stderr.on('data', (c) => (stderr += c))
    const exited = new Promise((r) => child.on('exit', r))
    try {
      const url = await listeningUrl(child, (c) => (stdout += c))
      await untilReady(url, 120_000)
      const r = await fetch(`${url}/talk`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hi' }),
      })
      assert.equal(r.status, 200)
      const environs = childrenOf(child.pid).map((pid) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0'))
      child.kill('SIGTERM')
      await exited
      return { stdout, stderr, environs }
    } finally {
      child.kill('SIGKILL')
    }
  }

  const records = (stdout: string) =>
    stdout
      .split('\n')
      .filter((l) => l !== '')
      .map((l): Record<string, unknown> => {
        try {
          return JSON.parse(l) as Record<string, unknown>
        } catch {
          return assert.fail(`stdout has a line that is not JSON: ${l}`)
        }
      })

  it("logs onnxruntime's lines and a custom runner's console as JSON records; telemetry off in every worker", {
    timeout: 240_000,
  }, async () => {
    await saveNegModel(home)
    const debug = await serve('debug')
    const logged = records(debug.stdout)
    const ort = logged.filter((r) => r.source === 'onnxruntime')
    assert.ok(ort.length > 0, `onnxruntime's info lines (kept at debug) are logged: ${debug.stdout.slice(0, 1500)}`)
    assert.ok(
      ort.every((r) => r.runner === 'neg' && typeof r.worker === 'number' && /\.cc:\d+/.test(String(r.at))),
      JSON.stringify(ort[0]),
    )
    const chatty = logged.filter((r) => r.runner === 'chatty')
    assert.ok(
      chatty.some((r) => r.source === 'stdout' && r.level === 30 && r.msg === 'chatty: heard hi'),
      JSON.stringify(chatty),
    )
    assert.ok(chatty.some((r) => r.source === 'stderr' && r.level === 40 && r.msg === 'chatty: a warning of its own'))
    assert.doesNotMatch(debug.stderr, /onnxruntime:|chatty:/, 'nothing of the workers goes out raw')
    assert.ok(debug.environs.length >= 2, 'a worker process per runner')
    for (const env of debug.environs) assert.ok(env.includes('ORT_DISABLE_TELEMETRY=1'), 'telemetry off in workers')

    // At the default level onnxruntime writes only warnings and worse: its start-up chatter is not logged.
    const info = await serve('info')
    assert.equal(records(info.stdout).filter((r) => r.source === 'onnxruntime' && Number(r.level) < 40).length, 0)
  })
})
