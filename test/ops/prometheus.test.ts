import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { until } from '../utils/remote.js'
import { monitoring, startPrometheus } from '../utils/prometheus.js'
import { serveReady } from '../utils/serve.js'

// The monitoring tools operators run, for real: promtool lints our /metrics, and a Prometheus
// server (Debian package) scrapes a running `bundle serve` and answers queries on it.
// .ci/run installs them and sets BUNDLE_REQUIRE_MONITORING_TESTS=1, so CI cannot skip this.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))

describe('monitoring with the real Prometheus', { skip: monitoring.skip }, () => {
  const stops: (() => Promise<void>)[] = []
  after(async () => {
    for (const stop of stops.reverse()) await stop()
  })

  it('promtool accepts /metrics; Prometheus scrapes the server and a query returns the request counter', {
    timeout: 180_000,
  }, async () => {
    assert.ok(monitoring.present, 'prometheus and promtool are required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
    const server = await serveReady(QUICKSTART)
    stops.push(server.stop)
    const url = server.url
    const png = readFileSync(new URL('../fixtures/images/hello-0.png', import.meta.url))
    for (let i = 0; i < 5; i++)
      assert.equal(
        (await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png }))
          .status,
        200,
      )
    assert.equal(
      (await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status,
      415,
    )

    // promtool's lint: names, types, help text, histogram and counter conventions.
    const metrics = await (await fetch(`${url}/metrics`)).text()
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: metrics, encoding: 'utf8' })
    assert.equal(lint.status, 0, `promtool check metrics: ${lint.stdout}${lint.stderr}`)

    // A real Prometheus scraping it every second (promtool checks its config; it waits for the target to be up).
    const prom = await startPrometheus([`127.0.0.1:${server.port}`])
    stops.push(prom.stop)
    const query = prom.query
    await until(
      'the request counter',
      async () =>
        Number((await query('sum(bundle_request_total{endpoint="classify",status="200"})'))[0]?.value?.[1] ?? 0) === 5,
      30_000,
    )
    const refused = await query('sum(bundle_request_total{endpoint="classify",status="415"})')
    assert.equal(refused[0]?.value?.[1], '1')
    // The series the Grafana dashboard uses exist with the labels it groups by.
    const runner = await query('bundle_runner_inference_total{runner="ocr-cls"}')
    assert.ok(Number(runner[0]?.value?.[1]) >= 5, JSON.stringify(runner))
    assert.ok((await query('bundle_runner_batch_size_bucket{runner="ocr-cls"}')).length > 0)
    assert.ok((await query('bundle_request_duration_seconds_bucket{endpoint="classify"}')).length > 0)
  })
})
