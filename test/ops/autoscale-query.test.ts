import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { adapterRules, desiredReplicasQuery, desiredWorkersQuery } from '../../builder/k8s-autoscale.js'
import { monitoring } from '../utils/prometheus.js'
import { type PrivateRedis, remoteServe, until, usePrivateRedis, worker } from '../utils/remote.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// The query `bundle deploy k8s --autoscale queue` puts in its KEDA trigger (and prometheus-adapter's
// rule for --queue-scaler hpa), run by promtool on the
// series a real server produced under load: the samples of bundle_desired_replicas a quickstart
// server published while four clients sent it tensors, as two replicas would report them, beside
// another service's series that must not count. .ci/run installs promtool
// (BUNDLE_REQUIRE_MONITORING_TESTS=1), so CI cannot skip this.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))
const REMOTE = fileURLToPath(new URL('../fixtures/remote-service.ts', import.meta.url))

/** promtool test rules on `tests`; asserts it passes. */
function promtoolTest(tests: unknown[]): void {
  const file = join(tempDir(), 'autoscale-test.yml')
  writeFileSync(file, stringify({ rule_files: [], evaluation_interval: '15s', tests }))
  const r = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' })
  assert.equal(r.status, 0, `promtool test rules: ${r.stdout}${r.stderr}`)
}

/** bundle_desired_replicas{service="quickstart"} on a server's /metrics now. */
async function desired(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith('bundle_desired_replicas{service="quickstart"}'))
  return Number(line?.split(' ').at(-1))
}

describe('the autoscaling query on real series (promtool)', { skip: monitoring.skip }, () => {
  const stops: (() => Promise<void>)[] = []
  after(async () => {
    for (const stop of stops.reverse()) await stop()
  })

  it('sums what the replicas report for the service, and nothing else', { timeout: 180_000 }, async () => {
    assert.ok(monitoring.present, 'promtool is required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
    const server = await serveReady(QUICKSTART)
    stops.push(server.stop)
    // Four closed-loop clients for a few seconds; a sample of the gauge each second meanwhile.
    const body = new Uint8Array(new Float32Array(3 * 48 * 192).fill(0.5).buffer)
    let loading = true
    const client = async () => {
      while (loading)
        await fetch(`${server.url}/classifyTensor`, {
          method: 'POST',
          headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,192' },
          body,
        }).then((r) => r.arrayBuffer())
    }
    const clients = [client(), client(), client(), client()]
    const samples: number[] = []
    while (samples.length < 4) {
      await new Promise((r) => setTimeout(r, 1_000))
      samples.push(await desired(server.url))
    }
    loading = false
    await Promise.all(clients)
    assert.ok(
      samples.every((v) => Number.isFinite(v) && v > 0),
      `samples under load: ${samples}`,
    )

    // Two replicas reporting these samples (the second at half), and another service's series.
    // Rounded to multiples of 1/1024 (exact in binary), so the expected sum is exact too.
    const scaled = (k: number) => samples.map((v) => (Math.max(1, Math.round(v * 1024)) / 1024) * k)
    const values = (k: number) => scaled(k).join(' ')
    const last = samples.length - 1
    const expected = scaled(1)[last]! + scaled(0.5)[last]!
    promtoolTest([
      {
        interval: '15s',
        input_series: [
          { series: 'bundle_desired_replicas{service="quickstart",instance="10.0.0.1:3000"}', values: values(1) },
          { series: 'bundle_desired_replicas{service="quickstart",instance="10.0.0.2:3000"}', values: values(0.5) },
          { series: 'bundle_desired_replicas{service="other",instance="10.0.0.3:3000"}', values: values(7) },
        ],
        promql_expr_test: [
          {
            expr: desiredReplicasQuery('quickstart'),
            eval_time: `${last * 15}s`,
            exp_samples: [{ labels: '{}', value: expected }],
          },
          // prometheus-adapter's rule (--queue-scaler hpa), with what the adapter fills in for the HPA's selector.
          {
            expr: adapterRules.externalRules[0]!.metricsQuery.replace('<<.Series>>', 'bundle_desired_replicas').replace(
              '<<.LabelMatchers>>',
              'service="quickstart"',
            ),
            eval_time: `${last * 15}s`,
            exp_samples: [{ labels: '{service="quickstart"}', value: expected }],
          },
        ],
      },
    ])
  })
})

describe("the workers' autoscaling query on real series (promtool)", { skip: monitoring.skip }, () => {
  let redis: PrivateRedis
  const track = usePrivateRedis((r) => (redis = r))

  it("sums the replicas' estimates per runner and takes the runner that needs the most", {
    timeout: 180_000,
  }, async () => {
    assert.ok(monitoring.present, 'promtool is required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
    // One slow worker (200 ms a batch of up to 16 rows: 80 rows/s) and 64 clients: it is saturated.
    const env = { ACCEL_DELAY_MS: '200', ACCEL_TIMEOUT_MS: '60000' }
    const api = track(await remoteServe(REMOTE, redis.url, env))
    track(await worker(REMOTE, redis.url, env))
    await until('ready', async () => (await fetch(`${api.url}/readyz`)).status === 200)
    let loading = true
    const client = async (i: number) => {
      while (loading)
        await fetch(`${api.url}/double`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ x: i }),
        }).then((r) => r.arrayBuffer())
    }
    const clients = Array.from({ length: 64 }, (_, i) => client(i))
    const desired = async () => {
      const text = await (await fetch(`${api.url}/metrics`)).text()
      const m = /^bundle_runner_desired_workers\{service="remote-test",runner="accel"\} (\S+)$/m.exec(text)
      return m ? Number(m[1]) : Number.NaN
    }
    // The offered rate is a 10 s window: sample once most of it has filled.
    await new Promise((r) => setTimeout(r, 8_000))
    const samples: number[] = []
    while (samples.length < 4) {
      await new Promise((r) => setTimeout(r, 1_000))
      samples.push(await desired())
    }
    loading = false
    await Promise.all(clients)
    // A saturated worker: about one worker's worth.
    assert.ok(
      samples.every((v) => v > 0.7 && v < 1.5),
      `one saturated worker's load, in workers: ${samples}`,
    )

    // Two API replicas, each sending its share (one at half), and a second runner of the service
    // needing less; another service's series must not count.
    const scaled = (k: number) => samples.map((v) => (Math.max(1, Math.round(v * 1024)) / 1024) * k)
    const values = (k: number) => scaled(k).join(' ')
    const last = samples.length - 1
    const series = (runner: string, pod: string, service = 'remote-test') =>
      `bundle_runner_desired_workers{service="${service}",runner="${runner}",instance="${pod}:3000"}`
    const input_series = [
      { series: series('accel', '10.0.0.1'), values: values(1) },
      { series: series('accel', '10.0.0.2'), values: values(0.5) },
      { series: series('tokenizer', '10.0.0.1'), values: values(0.25) },
      { series: series('tokenizer', '10.0.0.2'), values: values(0.25) },
      { series: series('accel', '10.0.0.3', 'other'), values: values(7) },
    ]
    const expected = scaled(1)[last]! + scaled(0.5)[last]!
    promtoolTest([
      {
        interval: '15s',
        input_series,
        promql_expr_test: [
          {
            expr: desiredWorkersQuery('remote-test'),
            eval_time: `${last * 15}s`,
            exp_samples: [{ labels: '{}', value: expected }],
          },
          // prometheus-adapter's worker rule (--queue-scaler hpa), its selector filled in.
          {
            expr: adapterRules.externalRules[1]!.metricsQuery.replace(
              '<<.Series>>',
              'bundle_runner_desired_workers',
            ).replace('<<.LabelMatchers>>', 'service="remote-test"'),
            eval_time: `${last * 15}s`,
            exp_samples: [{ labels: '{service="remote-test"}', value: expected }],
          },
        ],
      },
    ])
  })
})
