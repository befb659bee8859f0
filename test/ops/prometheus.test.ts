import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BIN } from '../utils/cli.js'
import { freePort, until } from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

// The monitoring tools operators run, for real: promtool lints our /metrics, and a Prometheus
// server (Debian package) scrapes a running `bundle serve` and answers queries on it.
// .ci/run installs them and sets BUNDLE_REQUIRE_MONITORING_TESTS=1, so CI cannot skip this.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))
const has = (cmd: string) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0
const present = has('promtool') && has('prometheus')
const required = process.env.BUNDLE_REQUIRE_MONITORING_TESTS === '1'
const skip = !present && !required ? 'prometheus/promtool are not installed (apt-get install prometheus); CI installs them' : false

describe('monitoring with the real Prometheus', { skip }, () => {
  const children: ChildProcess[] = []
  after(() => {
    for (const c of children) c.kill('SIGKILL')
  })

  it('promtool accepts /metrics; Prometheus scrapes the server and a query returns the request counter', { timeout: 180_000 }, async () => {
    assert.ok(present, 'prometheus and promtool are required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
    const home = join(tempDir(), 'home')
    const port = freePort()
    const server = spawn(process.execPath, [BIN, 'serve', QUICKSTART, '--port', String(port)], { env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }, stdio: 'ignore' })
    children.push(server)
    const url = `http://127.0.0.1:${port}`
    await until('server ready', async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, 60_000)
    const png = readFileSync(new URL('../fixtures/images/hello-0.png', import.meta.url))
    for (let i = 0; i < 5; i++) assert.equal((await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png })).status, 200)
    assert.equal((await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status, 415)

    // promtool's lint: names, types, help text, histogram and counter conventions.
    const metrics = await (await fetch(`${url}/metrics`)).text()
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: metrics, encoding: 'utf8' })
    assert.equal(lint.status, 0, `promtool check metrics: ${lint.stdout}${lint.stderr}`)

    // A real Prometheus scraping it every second.
    const dir = tempDir()
    const promPort = freePort()
    writeFileSync(join(dir, 'prometheus.yml'), `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: modelbundle\n    static_configs:\n      - targets: ['127.0.0.1:${port}']\n`)
    const check = spawnSync('promtool', ['check', 'config', join(dir, 'prometheus.yml')], { encoding: 'utf8' })
    assert.equal(check.status, 0, check.stdout + check.stderr)
    const prom = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`], { stdio: 'ignore' })
    children.push(prom)
    const api = `http://127.0.0.1:${promPort}/api/v1`
    const query = async (q: string) => {
      const r = (await (await fetch(`${api}/query?query=${encodeURIComponent(q)}`)).json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } }
      assert.equal(r.status, 'success')
      return r.data.result
    }
    await until('prometheus ready', async () => (await fetch(`http://127.0.0.1:${promPort}/-/ready`).catch(() => undefined))?.status === 200, 60_000)
    await until('the target is up', async () => (await query('up{job="modelbundle"}'))[0]?.value[1] === '1', 60_000)
    await until('the request counter', async () => Number((await query('sum(bundle_request_total{endpoint="classify",status="200"})'))[0]?.value[1] ?? 0) === 5, 30_000)
    const refused = await query('sum(bundle_request_total{endpoint="classify",status="415"})')
    assert.equal(refused[0]?.value[1], '1')
    // The series the Grafana dashboard uses exist with the labels it groups by.
    const runner = await query('bundle_runner_inference_total{runner="ocr-cls"}')
    assert.ok(Number(runner[0]?.value[1]) >= 5, JSON.stringify(runner))
    assert.ok((await query('bundle_runner_batch_size_bucket{runner="ocr-cls"}')).length > 0)
    assert.ok((await query('bundle_request_duration_seconds_bucket{endpoint="classify"}')).length > 0)
  })
})
