import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import sharp from 'sharp'
import { findChromium, HEADLESS_FLAGS, isLoopback, readNetLog, runChromium, type NetLog } from '../utils/browser.js'
import { BIN } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { until } from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

// /docs in a real headless Chromium: Swagger UI runs, fetches /openapi.json and renders every
// operation in it; Chromium's own net log shows the page asked nothing of any other host; a
// screenshot is kept in test-artifacts/docs.png. .ci/run installs chromium and sets
// BUNDLE_REQUIRE_BROWSER_TESTS=1, so CI cannot skip this.

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const QUICKSTART = join(ROOT, 'examples/quickstart/service.ts')
const SCREENSHOT = join(ROOT, 'test-artifacts/docs.png')
const chromium = findChromium()
const required = process.env.BUNDLE_REQUIRE_BROWSER_TESTS === '1'
const skip =
  chromium === undefined && !required ? 'chromium is not installed (apt-get install chromium); CI installs it' : false
// Served under a name, not 127.0.0.1: Swagger UI hides its online-validator badge (an <img>
// from validator.swagger.io) when the spec URL contains "localhost" or "127.0.0.1", so only a
// real-looking host shows what users at https://models.example.com get. Chromium maps the name
// to loopback and every other name to NOTFOUND: nothing can leave the machine either way.
const HOST = 'docs.modelbundle.test'

const NOT_RENDERED = 'Failed to load API definition'

describe('/docs in real headless Chromium', { skip, timeout: 120_000 }, () => {
  const dir = tempDir()
  let origin = ''
  let server: ChildProcess | undefined
  let spec: { info: { title: string }; paths: Record<string, Record<string, unknown>> }
  let dom = ''
  let net: NetLog

  before(async () => {
    assert.ok(chromium, 'chromium is required here (BUNDLE_REQUIRE_BROWSER_TESTS=1)')
    server = spawn(process.execPath, [BIN, 'serve', QUICKSTART, '--port', '0'], {
      env: { ...process.env, BUNDLE_HOME: join(dir, 'home'), BUNDLE_ACCESS_LOG: '0' },
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    const local = await listeningUrl(server)
    origin = `http://${HOST}:${new URL(local).port}`
    await until(
      'server ready',
      async () => (await fetch(`${local}/readyz`).catch(() => undefined))?.status === 200,
      60_000,
    )
    spec = (await (await fetch(`${local}/openapi.json`)).json()) as typeof spec

    rmSync(SCREENSHOT, { force: true })
    mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true })
    const netLog = join(dir, 'net.json')
    // One run does all three: the DOM after Swagger UI rendered, the screenshot, the net log.
    // Virtual time stops while fetches are pending, so the budget is spent after /openapi.json.
    const run = await runChromium(chromium, [
      ...HEADLESS_FLAGS,
      `--user-data-dir=${join(dir, 'chromium-profile')}`,
      `--log-net-log=${netLog}`,
      `--host-resolver-rules=MAP ${HOST} 127.0.0.1 , MAP * ~NOTFOUND , EXCLUDE 127.0.0.1`,
      '--virtual-time-budget=10000',
      '--window-size=1280,2000',
      `--screenshot=${SCREENSHOT}`,
      '--dump-dom',
      `${origin}/docs`,
    ])
    assert.equal(run.code, 0, `chromium exited ${run.code}:\n${run.stderr.slice(-4000)}`)
    dom = run.stdout
    net = readNetLog(netLog)
  })

  after(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      const exited = new Promise((r) => server!.once('exit', r))
      server.kill('SIGTERM')
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))])
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL')
    }
  })

  it('Swagger UI renders every operation of /openapi.json', () => {
    assert.ok(dom.includes(`<title>${spec.info.title} — API docs</title>`), 'the docs page title')
    assert.ok(
      dom.includes('<div id="swagger-ui"><section class="swagger-ui swagger-container">'),
      'Swagger UI mounted in #swagger-ui',
    )
    assert.ok(!dom.includes(NOT_RENDERED), `Swagger UI could not load the spec:\n${dom.slice(0, 2000)}`)
    assert.ok(dom.includes(`<h1 class="title">${spec.info.title}<`), 'the info block shows the service name')

    const expected = Object.entries(spec.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    )
    assert.ok(expected.length >= 6, `the quickstart has its APIs and probes: ${expected.join(', ')}`)
    // Each operation is an opblock (its class names the method) whose summary holds data-path.
    const rendered = [
      ...dom.matchAll(
        /<div class="opblock opblock-(\w+)[^"]*"[^>]*>[\s\S]*?class="opblock-summary-path" data-path="([^"]+)"/g,
      ),
    ].map(([, m, p]) => `${m!.toUpperCase()} ${p}`)
    assert.deepEqual([...rendered].sort(), [...expected].sort(), 'every operation rendered once, and nothing else')
  })

  it('the page requests nothing but its own server (Chromium net log)', (t) => {
    // Requests from the page carry its origin as initiator, or are its own navigation. Chromium's
    // background services (sign-in, component updates) start requests with no origin and
    // type "other": they are not the page's, and the socket checks below show they went nowhere.
    const own = (r: { initiator: string; type: string }) => r.initiator === 'not an origin' && r.type === 'other'
    const page = net.requests.filter((r) => !own(r))
    const offsite = page.filter((r) => !r.url.startsWith(`${origin}/`) && !/^(data|blob):/.test(r.url))
    assert.deepEqual(
      offsite.map((r) => r.url),
      [],
      'the docs page asked for something off its own server',
    )

    // Not vacuous: the page, Swagger UI's assets and the spec were all fetched, and answered.
    const served = new Map(page.map((r) => [r.url.slice(origin.length), r.status]))
    for (const path of [
      '/docs',
      '/docs/assets/swagger-ui.css',
      '/docs/assets/swagger-ui-bundle.js',
      '/docs/assets/swagger-ui-standalone-preset.js',
      '/openapi.json',
    ]) {
      assert.equal(served.get(path), 'HTTP/1.1 200 OK', `${path}: ${served.get(path) ?? 'never requested'}`)
    }
    assert.ok(
      page.every((r) => r.initiator === origin || r.type === 'main frame'),
      JSON.stringify(page),
    )

    // Nothing left the machine: every TCP connection Chromium tried, and every UDP datagram it
    // sent, went to loopback. (Connected UDP sockets that send nothing are route probes.)
    assert.ok(net.tcpConnects.length > 0, 'the net log recorded TCP connections')
    assert.deepEqual(
      net.tcpConnects.filter((a) => !isLoopback(a)),
      [],
      'TCP connections off loopback',
    )
    assert.deepEqual(
      net.udpSends.filter((a) => !isLoopback(a)),
      [],
      'UDP datagrams off loopback',
    )
    const background = net.requests.filter(own)
    for (const r of background)
      assert.ok(
        r.netError !== undefined && r.status === undefined,
        `Chromium's own request got through: ${JSON.stringify(r)}`,
      )
    if (background.length)
      t.diagnostic(
        `Chromium's own requests, all blocked at name resolution: ` +
          `${[...new Set(background.map((r) => new URL(r.url).host))].join(', ')}`,
      )
  })

  it('a screenshot of the rendered page is kept in test-artifacts/docs.png', async () => {
    const png = readFileSync(SCREENSHOT)
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
    assert.ok(
      statSync(SCREENSHOT).size > 20_000,
      `a rendered page, not a blank one (${statSync(SCREENSHOT).size} bytes)`,
    )
    const meta = await sharp(png).metadata()
    assert.deepEqual([meta.width, meta.height], [1280, 2000])
    // A blank page is one colour (entropy 0); Swagger UI's coloured method badges and text are not.
    const stats = await sharp(png).stats()
    assert.ok(stats.entropy > 0.5, `image entropy ${stats.entropy}`)
    assert.ok(
      stats.channels.some((c) => c.max - c.min > 128),
      'contrast: text and method badges on white',
    )
  })
})
