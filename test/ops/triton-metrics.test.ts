import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { BIN, bundle } from '../utils/cli.js'
import { inferenceClient } from '../utils/grpc.js'
import { listeningUrl } from '../utils/port.js'
import { parsePrometheus, type Sample } from '../utils/prom.js'
import { monitoring, startPrometheus, type Prometheus, type Series } from '../utils/prometheus.js'
import { owned, untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'
import { saveNegModel } from '../utils/v2-models.js'

// `bundle serve --metrics-compat triton`, for users whose dashboards and alerts read Triton's
// nv_inference_* metrics: a real server (real worker process, real sockets) gets successful and
// failing /v2 inferences over HTTP and gRPC; its /metrics must say what Triton's would, agree with
// the /v2 statistics and the bundle_* series (the same measurements), and the queries of Triton's
// own Grafana dashboard (deploy/k8s-onprem/dashboard.json in triton-inference-server/server) must
// answer right on a real Prometheus scraping it (skipped without prometheus, forced in CI by
// BUNDLE_REQUIRE_MONITORING_TESTS=1, as in prometheus.test.ts).

const home = join(tempDir(), 'home')
const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0', BUNDLE_METRICS_COMPAT: '' }
const POD = 'modelbundle-0'

/** `bundle serve --models neg ARGS` on ports the OS picks; resolves once ready. */
async function serveModels(args: string[]) {
  const child = spawn(process.execPath, [BIN, 'serve', '--models', 'neg', '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let said = ''
  child.stderr!.on('data', (c: Buffer) => (said = (said + c.toString()).slice(-4096)))
  const stop = owned(child, undefined)
  try {
    const url = await listeningUrl(child, (c) => (said = (said + c).slice(-4096)))
    await untilReady(url, 120_000)
    const grpc = /"url":"grpc:\/\/([^"]+)"/.exec(said)?.[1]
    return { url, grpc, stop }
  } catch (e) {
    await stop()
    throw new Error(`${(e as Error).message}; the server said: ${said}`)
  }
}

const values = (shape: number[]) => Array.from({ length: shape[0]! * shape[1]! }, (_, i) => i + 1)
const httpInfer = (url: string, shape: number[], parameters?: object) =>
  fetch(`${url}/v2/models/neg/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape, data: values(shape) }],
      ...(parameters ? { parameters } : {}),
    }),
  })

// The traffic: 8 successes (6 over HTTP, 2 over gRPC) of 13 rows, 4 requests the model refuses
// (shape [1,3]; 3 over HTTP, 1 over gRPC) and 1 the scheduler sheds (a 1 µs timeout).
const HTTP_ROWS = [1, 2, 3, 1, 2, 1]
const GRPC_ROWS = [1, 2]
const SUCCESS = HTTP_ROWS.length + GRPC_ROWS.length
const ROWS = [...HTTP_ROWS, ...GRPC_ROWS].reduce((a, b) => a + b, 0)
const OTHER = 4
const REJECTED = 1

const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) => {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  assert.ok(found.length > 0, `no ${name} ${JSON.stringify(labels)}`)
  return found.reduce((n, s) => n + s.value, 0)
}

describe('bundle serve --metrics-compat triton', () => {
  const stops: (() => Promise<void>)[] = []
  let server: { url: string; grpc: string | undefined }
  let prom: Prometheus | undefined

  before(async () => {
    await saveNegModel(home)
    const s = await serveModels(['--metrics-compat', 'triton', '--grpc-port', '0'])
    stops.push(s.stop)
    server = s
    if (monitoring.present) {
      // Scraping before the traffic: rate() and increase() need the zeros it starts from.
      prom = await startPrometheus([new URL(s.url).host], 'triton', { pod: POD })
      stops.push(prom.stop)
      await until('a first scrape of the nv_ series', async () => (await prom!.query('nv_inference_count')).length > 0)
    }
    const http = await Promise.all(HTTP_ROWS.map((n) => httpInfer(s.url, [n, 2])))
    for (const r of http) assert.equal(r.status, 200, await r.text())
    for (let i = 0; i < 3; i++) assert.equal((await httpInfer(s.url, [1, 3])).status, 400)
    const shed = await httpInfer(s.url, [1, 2], { timeout: 1 })
    assert.equal(shed.status, 503, await shed.text())
    assert.ok(s.grpc, 'the gRPC address is logged')
    const grpc = inferenceClient(s.grpc)
    try {
      const fp32 = (n: number, width = 2) => ({
        model_name: 'neg',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [n, width], contents: { fp32_contents: values([n, width]) } }],
      })
      await Promise.all(GRPC_ROWS.map((n) => grpc.call('ModelInfer', fp32(n))))
      await assert.rejects(grpc.call('ModelInfer', fp32(1, 3)), (e: { code?: number }) => e.code === 3)
    } finally {
      grpc.close()
    }
  })
  after(async () => {
    for (const stop of stops.reverse()) await stop()
  })

  it("counts requests, inferences, executions and time as Triton's metrics do, from the same measurements", {
    timeout: 60_000,
  }, async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text()
    const m = parsePrometheus(text)
    const neg = { model: 'neg', version: '1' }
    assert.equal(value(m, 'nv_inference_request_success', neg), SUCCESS)
    assert.equal(value(m, 'nv_inference_request_failure', neg), OTHER + REJECTED)
    assert.equal(value(m, 'nv_inference_request_failure', { ...neg, reason: 'OTHER' }), OTHER)
    assert.equal(value(m, 'nv_inference_request_failure', { ...neg, reason: 'REJECTED' }), REJECTED)
    assert.equal(value(m, 'nv_inference_request_failure', { ...neg, reason: 'BACKEND' }), 0)
    assert.equal(value(m, 'nv_inference_request_failure', { ...neg, reason: 'CANCELED' }), 0)
    // A request of n rows is n inferences; executions are the batches they ran in.
    assert.equal(value(m, 'nv_inference_count', neg), ROWS)
    const exec = value(m, 'nv_inference_exec_count', neg)
    assert.ok(exec >= 1 && exec <= SUCCESS, `exec_count ${exec}`)
    // The same batches the bundle_* series and the /v2 statistics count.
    const runner = { runner: 'neg' }
    assert.equal(exec, value(m, 'bundle_runner_execution_total', runner))
    assert.equal(exec, value(m, 'bundle_runner_batch_size_count', runner))
    assert.equal(ROWS, value(m, 'bundle_runner_inference_total', runner))
    const stats = (
      (await (await fetch(`${server.url}/v2/models/neg/stats`)).json()) as {
        model_stats: {
          inference_count: number
          execution_count: number
          inference_stats: { success: { count: number; ns: number }; fail: { count: number } }
        }[]
      }
    ).model_stats[0]!
    assert.deepEqual(
      [
        stats.inference_count,
        stats.execution_count,
        stats.inference_stats.success.count,
        stats.inference_stats.fail.count,
      ],
      [ROWS, exec, SUCCESS, OTHER + REJECTED],
    )
    assert.equal(value(m, 'nv_inference_request_duration_us', neg), stats.inference_stats.success.ns / 1000)
    // Cumulative microseconds: every stage took time, and no request spent more in its stages than in all.
    const us = (stage: string) => value(m, `nv_inference_${stage}_duration_us`, neg)
    const [request, queue, input, infer, output] = [
      'request',
      'queue',
      'compute_input',
      'compute_infer',
      'compute_output',
    ].map(us)
    for (const [stage, v] of Object.entries({ request, input, infer, output })) assert.ok(v! > 0, `${stage}: ${v}`)
    assert.ok(queue! >= 0)
    assert.ok(
      request! >= queue! + input! + infer! + output!,
      `request ${request} < ${queue}+${input}+${infer}+${output}`,
    )
    assert.equal(value(m, 'nv_inference_pending_request_count', neg), 0, 'nothing waits now')
    // promtool's lint objects only to Triton's own naming (counters without _total, µs units), never to ours.
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    if (lint.error === undefined) {
      const complaints = `${lint.stdout}${lint.stderr}`.split('\n').filter((l) => l.trim())
      for (const c of complaints) assert.match(c, /^nv_inference_\w+ /, `promtool: ${c}`)
    }
  })

  it("a Triton Grafana dashboard's queries answer right on a real Prometheus scraping the server", {
    skip: monitoring.skip,
    timeout: 120_000,
  }, async () => {
    assert.ok(prom, 'prometheus and promtool are required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
    const scraped = parsePrometheus(await (await fetch(`${server.url}/metrics`)).text())
    const neg = { model: 'neg', version: '1' }
    const total = (stage: string) => value(scraped, `nv_inference_${stage}_duration_us`, neg)
    const exec = value(scraped, 'nv_inference_exec_count', neg)
    await until(
      'Prometheus has every request',
      async () =>
        Number((await prom!.query('sum(nv_inference_request_success) by (pod)'))[0]?.value?.[1]) === SUCCESS &&
        Number((await prom!.query('sum(nv_inference_request_failure) by (pod)'))[0]?.value?.[1]) === OTHER + REJECTED,
      30_000,
    )
    // One instant for every query, soon after the traffic: the dashboard's 30 s windows hold it.
    const time = String(Date.now() / 1000)
    const query = async (q: string): Promise<Series[]> => {
      const r = await prom!.get<{ result: Series[] }>('query', { query: q, time })
      assert.equal(r.status, 'success', `${q}: ${r.error}`)
      return r.data.result
    }
    const one = async (q: string) => {
      const r = await query(q)
      assert.equal(r.length, 1, `${q}: ${JSON.stringify(r)}`)
      return { labels: r[0]!.metric, v: Number(r[0]!.value![1]) }
    }
    const close = (a: number, b: number, what: string) =>
      assert.ok(Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`)

    // The dashboard's panels, as it writes them.
    assert.equal((await one('count(count(nv_inference_count) by (instance))')).v, 1, 'Active Triton Instances')
    const share = await one(
      'sum by (pod) (rate(nv_inference_count[1m])) / ignoring(pod) group_left sum (rate(nv_inference_count[1m]))',
    )
    assert.deepEqual([share.labels.pod, share.v], [POD, 1], 'Proportion of Requests by Pod')
    const ok = await one('sum(nv_inference_request_success) by (pod)')
    assert.deepEqual([ok.labels, ok.v], [{ pod: POD }, SUCCESS], 'Cumulative Inference Requests by Pod: Success')
    const failed = await one('sum(nv_inference_request_failure) by (pod)')
    assert.deepEqual([failed.labels, failed.v], [{ pod: POD }, OTHER + REJECTED], 'Failure')
    const compute = await one('sum(rate(nv_inference_compute_infer_duration_us[30s])) by (model) / 1000')
    assert.equal(compute.labels.model, 'neg', 'Compute Time by Model (milliseconds)')
    assert.ok(compute.v > 0, `compute time ${compute.v}`)
    const queued = await one(
      'avg(rate(nv_inference_queue_duration_us[30s])/(1+rate(nv_inference_request_success[30s]))) by (pod)',
    )
    assert.equal(queued.labels.pod, POD, 'Average Queue Time by Pod (microseconds)')
    assert.ok(Number.isFinite(queued.v) && queued.v >= 0, `queue time ${queued.v}`)

    // Per-request means as Triton users compute them: the ratio of two rates over one window is
    // exact (both series come from the same scrapes), so it must equal the totals' ratio.
    const per = (metric: string) => `rate(${metric}[1m]) / rate(nv_inference_request_success[1m])`
    close((await one(per('nv_inference_queue_duration_us'))).v, total('queue') / SUCCESS, 'mean queue time')
    close((await one(per('nv_inference_request_duration_us'))).v, total('request') / SUCCESS, 'mean request time')
    close((await one(per('nv_inference_compute_infer_duration_us'))).v, total('compute_infer') / SUCCESS, 'compute')
    close(
      (await one('sum(rate(nv_inference_count[1m])) / sum(rate(nv_inference_exec_count[1m]))')).v,
      ROWS / exec,
      'mean batch size',
    )
    // Alerts: failures by reason; nothing pending.
    const reasons = await query('sum by (model, reason) (increase(nv_inference_request_failure[1m])) > 0')
    assert.deepEqual(reasons.map((s) => `${s.metric.model} ${s.metric.reason}`).sort(), ['neg OTHER', 'neg REJECTED'])
    assert.deepEqual(await query('max by (model) (nv_inference_pending_request_count) > 0'), [])
  })

  it('without the setting no nv_ series; a value it does not know stops the server before it listens', {
    timeout: 120_000,
  }, async () => {
    const plain = await serveModels([])
    try {
      const text = await (await fetch(`${plain.url}/metrics`)).text()
      assert.match(text, /^bundle_runner_execution_total/m)
      assert.doesNotMatch(text, /nv_/)
    } finally {
      await plain.stop()
    }
    const flag = await bundle(['serve', '--models', 'neg', '--port', '0', '--metrics-compat', 'prometheus'], env)
    assert.equal(flag.code, 2, flag.stderr)
    assert.match(flag.stderr, /^error E_SERVE_CONFIG_INVALID: --metrics-compat "prometheus" is not a metrics set/m)
    assert.doesNotMatch(flag.stdout, /listening/)
    const variable = await bundle(['serve', '--models', 'neg', '--port', '0'], { ...env, BUNDLE_METRICS_COMPAT: 'nv' })
    assert.equal(variable.code, 2, variable.stderr)
    assert.match(variable.stderr, /E_SERVE_CONFIG_INVALID: BUNDLE_METRICS_COMPAT "nv" is not a metrics set/)
    assert.doesNotMatch(variable.stdout, /listening/)
  })
})
