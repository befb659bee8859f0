import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { adapterRules, desiredReplicasQuery } from '../../builder/k8s-autoscale.js'
import { monitoring } from '../utils/prometheus.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// The query `bundle deploy k8s --autoscale queue` puts in its KEDA trigger (and prometheus-adapter's
// rule for --queue-scaler hpa), run by promtool on the
// series a real server produced under load: the samples of bundle_desired_replicas a quickstart
// server published while four clients sent it tensors, as two replicas would report them, beside
// another service's series that must not count. .ci/run installs promtool
// (BUNDLE_REQUIRE_MONITORING_TESTS=1), so CI cannot skip this.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))

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
    const file = join(tempDir(), 'autoscale-test.yml')
    writeFileSync(
      file,
      stringify({
        rule_files: [],
        evaluation_interval: '15s',
        tests: [
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
                expr: adapterRules.externalRules[0]!.metricsQuery.replace(
                  '<<.Series>>',
                  'bundle_desired_replicas',
                ).replace('<<.LabelMatchers>>', 'service="quickstart"'),
                eval_time: `${last * 15}s`,
                exp_samples: [{ labels: '{service="quickstart"}', value: expected }],
              },
            ],
          },
        ],
      }),
    )
    const r = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' })
    assert.equal(r.status, 0, `promtool test rules: ${r.stdout}${r.stderr}`)
  })
})
