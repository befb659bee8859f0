import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { request } from 'node:http'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { BIN } from '../utils/cli.js'
import { freePort } from '../utils/port.js'
import { requestCounts } from '../utils/prom.js'
import { until } from '../utils/until.js'

const SLOW = fileURLToPath(new URL('../fixtures/slow-service.ts', import.meta.url))

/** Starts `bundle serve` on a free port and waits for its "listening" log line. */
function start(
  entry: string,
  extra: string[] = [],
): Promise<{ child: ChildProcess; url: string; logs: string[]; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [BIN, 'serve', entry, '--port', '0', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const logs: string[] = []
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
  return new Promise((resolve, reject) => {
    let buf = ''
    child.stderr!.on('data', (c) => logs.push(String(c)))
    child.stdout!.on('data', (c) => {
      buf += c
      for (const line of buf.split('\n').slice(0, -1)) {
        logs.push(line)
        const m = /"url":"([^"]+)".*"msg":"listening"/.exec(line)
        if (m) resolve({ child, url: m[1]!, logs, exited })
      }
      buf = buf.slice(buf.lastIndexOf('\n') + 1)
    })
    void exited.then((code) => reject(new Error(`serve exited with ${code}: ${logs.join('')}`)))
  })
}

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const r = await fetch(`${url}/readyz`).catch(() => undefined)
    if (r?.status === 200) return
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error('never ready')
}

/** A request on its own connection, so the server's close() cannot pretend it was idle. */
function slowRequest(url: string, ms: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/sleep`,
      { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false },
      (res) => {
        let body = ''
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode!, body }))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify({ ms }))
  })
}

describe('bundle serve (real process, real socket, real signals)', () => {
  it('serves the greeter example from its TypeScript source', { timeout: 60_000 }, async () => {
    const s = await start(fileURLToPath(new URL('../../examples/greeter/service.ts', import.meta.url)))
    await waitReady(s.url)
    const r = await fetch(`${s.url}/greet`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'abc-1' },
      body: JSON.stringify({ name: 'ada' }),
    })
    assert.deepEqual(await r.json(), { greeting: 'hello ada!' })
    assert.equal(r.headers.get('x-request-id'), 'abc-1')
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
    assert.ok(
      s.logs.some((l) => /"path":"\/greet".*"status":200.*"requestId":"abc-1"/.test(l)),
      'one access line with the request id',
    )
  })

  it('SIGTERM with requests in flight: all complete, new connections refused, shutdown hooks run, exit 0', {
    timeout: 60_000,
  }, async () => {
    const s = await start(SLOW)
    await waitReady(s.url)
    const inflight = Array.from({ length: 5 }, () => slowRequest(s.url, 2_000))
    // SIGTERM once the server is handling all five, and look for refusal once it says it drains.
    await until('five requests in progress', async () => (await requestCounts(s.url, 'sleep')).inProgress === 5)
    s.child.kill('SIGTERM')
    await until('"shutting down" in the log', () => s.logs.some((l) => l.includes('"msg":"shutting down"')))
    await assert.rejects(fetch(`${s.url}/livez`), 'a new connection is refused while draining')
    const results = await Promise.all(inflight)
    for (const r of results)
      assert.deepEqual({ status: r.status, body: JSON.parse(r.body) }, { status: 200, body: { slept: 2_000 } })
    assert.equal(await s.exited, 0)
    assert.ok(s.logs.some((l) => l.includes('shutdown hook ran')))
  })

  it('SIGTERM with requests longer than --grace: exits within the grace period, the rest cut off', {
    timeout: 60_000,
  }, async () => {
    const s = await start(SLOW, ['--grace', '1000'])
    await waitReady(s.url)
    const quick = slowRequest(s.url, 800)
    const long = Array.from({ length: 3 }, () =>
      slowRequest(s.url, 5000).then(
        (r) => r.status,
        () => 'cut off',
      ),
    )
    await until('four requests in progress', async () => (await requestCounts(s.url, 'sleep')).inProgress === 4)
    const signalled = Date.now()
    s.child.kill('SIGTERM')
    assert.deepEqual(
      await quick,
      { status: 200, body: JSON.stringify({ slept: 800 }) },
      'what finishes within the grace period is answered',
    )
    assert.equal(await s.exited, 0)
    const took = Date.now() - signalled
    // Below the 5 s the long requests take, with room for a busy machine: the grace ended them.
    assert.ok(took >= 900 && took < 4_000, `exited ${took} ms after SIGTERM with --grace 1000`)
    assert.deepEqual(
      await Promise.all(long),
      ['cut off', 'cut off', 'cut off'],
      'requests still running at the end of the grace period lose their connection',
    )
    assert.ok(
      s.logs.some((l) => l.includes('grace period over')),
      'the log says why',
    )
  })

  it('a bad entry fails with one coded line and exit 1', { timeout: 30_000 }, async () => {
    const child = spawn(process.execPath, [BIN, 'serve', 'nope/missing.ts'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (c) => (err += c))
    const code = await new Promise((r) => child.on('exit', r))
    assert.equal(code, 1)
    assert.match(err.trim(), /^error E_SERVICE_LOAD: .*missing\.ts: no such file$/)
  })

  /** `bundle serve ARGS` to its exit: code, stdout, stderr. */
  const serveOnce = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'serve', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...env },
      })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (c) => (stdout += c))
      child.stderr.on('data', (c) => (stderr += c))
      child.on('exit', (code) => resolve({ code, stdout, stderr }))
    })

  it('a runner the service uses but does not declare: a warning at start-up, and a call says to add it', {
    timeout: 60_000,
  }, async () => {
    const s = await start(fileURLToPath(new URL('../fixtures/undeclared-service.ts', import.meta.url)))
    try {
      const until = Date.now() + 30_000
      while (!s.logs.some((l) => l.includes('"msg":"service ready"')) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 50))
      const warning = s.logs.find((l) => l.includes('"runner":"forgotten"'))
      assert.ok(warning, `a start-up warning names the runner: ${s.logs.join('')}`)
      assert.match(warning, /"level":40/)
      assert.match(warning, /not in the runners of service undeclared/)
      const res = await fetch(`${s.url}/shout`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'hi',
      })
      assert.equal(res.status, 500)
      const body = (await res.json()) as { error: { code: string; message: string } }
      assert.equal(body.error.code, 'E_RUNNER_NOT_DECLARED')
      assert.match(body.error.message, /runner forgotten .*add it to @service\(\{ runners/)
    } finally {
      s.child.kill('SIGTERM')
      await s.exited
    }
  })

  it('a busy port is E_ADDRESS_IN_USE naming the port, exit 1', { timeout: 30_000 }, async () => {
    const { createServer } = await import('node:net')
    const taken = createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    const port = (taken.address() as { port: number }).port
    try {
      const r = await serveOnce(['examples/greeter/service.ts', '--port', String(port)])
      assert.equal(r.code, 1, r.stderr)
      assert.match(
        r.stderr,
        new RegExp(`^error E_ADDRESS_IN_USE: port ${port} on 127\\.0\\.0\\.1 is already in use[^\\n]*\\n$`),
      )
      assert.doesNotMatch(r.stdout, /"msg":"listening"/)
    } finally {
      taken.close()
    }
  })

  it('a bad BUNDLE_RUNNER_* value or an unknown runner in --config: one line, exit 2, before any listening line', {
    timeout: 30_000,
  }, async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const dir = mkdtempSync(join(tmpdir(), 'mb-serve-cfg-'))
    try {
      const env = { BUNDLE_HOME: join(dir, 'home') }
      const badEnv = await serveOnce(['examples/quickstart/service.ts', '--port', '0'], {
        ...env,
        BUNDLE_RUNNER_OCR_CLS_WORKERS: 'two',
      })
      const cfg = join(dir, 'serve.yaml')
      writeFileSync(cfg, 'runners:\n  ocr-clss:\n    workers: 2\n')
      const badName = await serveOnce(['examples/quickstart/service.ts', '--port', '0', '--config', cfg], env)
      for (const [r, what] of [
        [badEnv, /BUNDLE_RUNNER_OCR_CLS_WORKERS="two" is not a number/],
        [badName, /the config names runner "ocr-clss", but this service has ocr-cls/],
      ] as const) {
        assert.equal(r.code, 2, r.stderr)
        assert.equal(r.stderr.split('\n').length, 2, `one line: ${r.stderr}`)
        assert.match(r.stderr, /^error E_SERVE_CONFIG_INVALID: /)
        assert.match(r.stderr, what)
        assert.equal(r.stdout, '', 'no listening line, no stack on stdout')
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('slow clients', () => {
  it('trickling headers do not block others and are cut off at the headers timeout', { timeout: 30_000 }, async () => {
    const { serve, definitionOf } = await import('../../framework/index.js')
    const { Greeter } = await import('../../examples/greeter/service.js')
    const pino = (await import('pino')).default
    const { connect } = await import('node:net')
    const running = await serve(definitionOf(Greeter)!, {
      port: 0,
      handleSignals: false,
      logger: pino({ level: 'silent' }),
      headersTimeoutMs: 1000,
    })
    try {
      const port = Number(new URL(running.url).port)
      const closed: Promise<number>[] = []
      const started = Date.now()
      for (let i = 0; i < 50; i++) {
        const sock = connect(port, '127.0.0.1')
        sock.on('error', () => undefined)
        sock.write('POST /greet HTTP/1.1\r\nHost: x\r\n') // never finishes its headers
        const drip = setInterval(() => sock.write('X-Slow: 1\r\n'), 200)
        closed.push(new Promise((r) => sock.on('close', () => (clearInterval(drip), r(Date.now() - started)))))
      }
      const t = Date.now()
      const r = await fetch(`${running.url}/greet`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"name":"fast"}',
      })
      assert.equal(r.status, 200)
      assert.ok(Date.now() - t < 1000, 'a normal client is served while 50 slow ones hang on')
      const after = await Promise.all(closed)
      assert.ok(Math.max(...after) < 5000, `slow connections closed by the server (after ${Math.max(...after)} ms)`)
    } finally {
      await running.close()
    }
  })
})

describe('bundle serve --reload', () => {
  it('restarts on a source change and serves the new code', { timeout: 60_000 }, async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs')
    const { join } = await import('node:path')
    // Inside the project so the service resolves 'modelbundle' like an example does.
    const dir = mkdtempSync(fileURLToPath(new URL('../fixtures/tmp-reload-', import.meta.url)))
    const file = join(dir, 'service.ts')
    const source = (word: string) =>
      `import { api, io, service } from 'modelbundle'\n@service({ name: 'reloading' })\nexport class Reloading ` +
      `{\n  @api({ input: io.text(), output: io.text() })\n  async word(_: string) { return '${word}' }\n}\n`
    writeFileSync(file, source('before'))
    // A fixed port: the reloaded server must come back on it.
    const port = await freePort()
    const child = spawn(process.execPath, [BIN, 'serve', file, '--port', String(port), '--reload'], { stdio: 'ignore' })
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
    const word = async (): Promise<string | undefined> => {
      const r = await fetch(`http://127.0.0.1:${port}/word`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'x',
      }).catch(() => undefined)
      return r?.status === 200 ? r.text() : undefined
    }
    const until = async (expected: string): Promise<void> => {
      for (let i = 0; i < 300; i++) {
        if ((await word()) === expected) return
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new Error(`never answered ${expected}`)
    }
    try {
      await until('before')
      writeFileSync(file, source('after'))
      await until('after')
    } finally {
      child.kill('SIGTERM')
      assert.equal(await exited, 0)
      rmSync(dir, { recursive: true, force: true })
    }
    assert.equal(await word(), undefined, 'the server child is gone too')
  })
})
