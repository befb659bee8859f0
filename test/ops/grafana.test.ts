import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import { parsePrometheus } from '../utils/prom.js'
import { monitoring, startPrometheus, type Series } from '../utils/prometheus.js'
import { serveReady, type Served } from '../utils/serve.js'
import { until } from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

/* biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's placeholder for the chosen data source,
   not a template */
const DATASOURCE = '${datasource}'

// docker/grafana/modelbundle-dashboard.json, proved three ways: it validates against Grafana's
// own dashboard JSON schema (vendored from grafana-foundation-sdk, see test/fixtures/grafana/),
// every metric its PromQL names is exported by a running `bundle serve`, and every panel query
// runs on a real Prometheus scraping that server (skipped without prometheus, forced in CI by
// BUNDLE_REQUIRE_MONITORING_TESTS=1, as in prometheus.test.ts).

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/service.ts', import.meta.url))
const STAND_IN = fileURLToPath(new URL('../fixtures/nvidia-smi/', import.meta.url))
const read = (rel: string) => JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as unknown
const dashboard = read('../../docker/grafana/modelbundle-dashboard.json') as Dashboard
const schema = read('../fixtures/grafana/dashboard.jsonschema.json') as object
// ajv-formats is CommonJS with a default export; under tsx/ESM it may arrive wrapped once more.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv

interface Target {
  expr: string
  refId: string
  datasource?: { type?: string; uid?: string }
  legendFormat?: string
}
interface Panel {
  type: string
  id: number
  title: string
  gridPos: { x: number; y: number; w: number; h: number }
  datasource?: { type?: string; uid?: string }
  targets?: Target[]
  panels?: Panel[]
}
interface Variable {
  type: string
  name: string
  query?: string
  datasource?: { type?: string; uid?: string }
}
interface Dashboard {
  schemaVersion: number
  panels: Panel[]
  templating: { list: Variable[] }
}

const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])])
const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })))
const variables = dashboard.templating.list

// Values a user would pick, and the interval Grafana would put in $__rate_interval: a fixed one
// wide enough that the requests sent below stay in every rate() window while the test queries.
const VALUES: Record<string, string> = {
  service: 'quickstart',
  runner: 'ocr-cls',
  __rate_interval: '1m',
  __interval: '15s',
  __range: '5m',
}
const substitute = (expr: string) =>
  expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (all, a: string | undefined, b: string | undefined) => VALUES[(a ?? b)!] ?? all)

const GROUPING = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'and',
  'or',
  'unless',
  'inf',
  'nan',
])

/**
 * Metric names a PromQL expression selects: identifiers left once strings, matchers, ranges, groupings and calls are
 * set aside.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(GROUPING, ' ')
  const names = new Set<string>()
  for (const m of bare.matchAll(/(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (/^\s*\(/.test(bare.slice(m.index + m[0].length)) || KEYWORDS.has(m[0].toLowerCase())) continue
    names.add(m[0])
  }
  return [...names]
}

/** Grafana's Prometheus `label_values(SELECTOR, LABEL)` variable query, split. */
function labelValuesQuery(q: string): { selector: string; label: string } {
  const m = /^label_values\((.+),\s*([a-zA-Z_]\w*)\s*\)$/.exec(q.trim())
  assert.ok(m, `not a label_values(selector, label) query: ${q}`)
  return { selector: m[1]!.trim(), label: m[2]! }
}

const dashboardMetrics = () =>
  new Set([
    ...queries.flatMap((q) => metricNames(q.expr)),
    ...variables.filter((v) => v.type === 'query').flatMap((v) => metricNames(labelValuesQuery(v.query!).selector)),
  ])

describe('the Grafana dashboard (docker/grafana/modelbundle-dashboard.json)', () => {
  it("validates against Grafana's dashboard JSON schema", () => {
    const ajv = new Ajv({ allErrors: true })
    addFormats(ajv)
    const validate = ajv.compile(schema)
    assert.ok(validate(dashboard), ajv.errorsText(validate.errors, { separator: '\n' }))
    assert.ok(dashboard.schemaVersion >= 39, `schemaVersion ${dashboard.schemaVersion}`)
    // The schema is not a rubber stamp: a panel without a type, or an unknown field, fails it.
    assert.equal(validate({ ...dashboard, panels: [{ title: 'x' }] }), false)
    assert.equal(validate({ ...dashboard, pannels: [] }), false)
  })

  it('every panel queries the templated Prometheus data source, uses only defined variables and fits the grid', () => {
    const defined = new Set([...variables.map((v) => v.name), ...Object.keys(VALUES).filter((k) => k.startsWith('__'))])
    assert.deepEqual(
      variables.map((v) => `${v.type}:${v.name}`),
      ['datasource:datasource', 'query:service', 'query:runner'],
    )
    assert.equal(variables[0]!.query, 'prometheus')
    assert.equal(labelValuesQuery(variables[1]!.query!).selector, 'bundle_request_total')
    assert.equal(labelValuesQuery(variables[1]!.query!).label, 'service')
    const ids = panels.map((p) => p.id)
    assert.equal(new Set(ids).size, ids.length, `panel ids repeat: ${ids}`)
    const cells = new Map<string, string>()
    for (const p of panels) {
      const { x, y, w, h } = p.gridPos
      assert.ok(x + w <= 24, `${p.title} overflows the 24-column grid`)
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          const other = cells.get(`${i},${j}`)
          assert.equal(other, undefined, `${p.title} overlaps ${other}`)
          cells.set(`${i},${j}`, p.title)
        }
      if (p.type === 'row') continue
      assert.ok((p.targets ?? []).length > 0, `${p.title} has no query`)
      assert.deepEqual(p.datasource, { type: 'prometheus', uid: DATASOURCE }, p.title)
    }
    for (const v of variables.filter((v) => v.type === 'query'))
      assert.deepEqual(v.datasource, { type: 'prometheus', uid: DATASOURCE }, v.name)
    for (const q of queries) {
      assert.deepEqual(q.datasource, { type: 'prometheus', uid: DATASOURCE }, `${q.panel} ${q.refId}`)
      for (const [, a, b] of q.expr.matchAll(/\$\{(\w+)\}|\$(\w+)/g))
        assert.ok(defined.has((a ?? b)!), `${q.panel}: $${a ?? b} is not a dashboard variable`)
      assert.doesNotMatch(substitute(q.expr), /\$/, q.panel)
    }
  })

  it('covers the request, batching, queue, shedding and worker series', () => {
    assert.deepEqual(
      metricNames(
        'histogram_quantile(0.99, sum by (le, endpoint) ' +
          '(rate(bundle_request_duration_seconds_bucket{service=~"$service"}[$__rate_interval])))',
      ),
      ['bundle_request_duration_seconds_bucket'],
    )
    assert.deepEqual(
      metricNames('sum by (a) (rate(x_sum[1m])) / sum without (b) (rate(x_count{c="d"}[1m])) > bool 0'),
      ['x_sum', 'x_count'],
    )
    const used = dashboardMetrics()
    for (const name of [
      'bundle_request_total',
      'bundle_request_duration_seconds_bucket',
      'bundle_request_in_progress',
      'bundle_runner_batch_size_bucket',
      'bundle_runner_queue_duration_seconds_bucket',
      'bundle_runner_execution_duration_seconds_bucket',
      'bundle_runner_queue_depth',
      'bundle_runner_rejected_total',
      'bundle_runner_workers',
      'bundle_runner_worker_restarts',
      'bundle_runner_batch_size_sum',
      'bundle_gpu_utilization_ratio',
      'bundle_gpu_memory_used_bytes',
      'bundle_gpu_power_watts',
      'bundle_gpu_runner_workers',
    ])
      assert.ok(used.has(name), `no panel shows ${name}`)
    // 429/503 are the server's shed responses; they come from the request counter.
    assert.ok(
      queries.some((q) => q.expr.includes('bundle_request_total') && q.expr.includes('429|503')),
      'no panel shows 429/503 responses',
    )
  })

  describe('against a running bundle serve', () => {
    let server: Served | undefined
    // With gRPC on, so its series (named by an alert) are exported too; on a stand-in GPU
    // machine (nvidia-smi answering from a recorded two-GPU table), with the classifier's worker
    // placed on half a GPU (onnxruntime still runs it on the CPU), so the GPU panels have data.
    const serve = async () => {
      if (server) return server
      const dir = tempDir()
      const config = join(dir, 'gpu.yaml')
      writeFileSync(config, 'runners:\n  ocr-cls:\n    resources: { gpu: 0.5 }\n    executionProviders: [cpu]\n')
      server = await serveReady(QUICKSTART, ['--config', config], {
        GRPC_PORT: '0',
        PATH: `${STAND_IN}${delimiter}${process.env.PATH}`,
        NVIDIA_SMI_FIXTURE: join(STAND_IN, 'two'),
        BUNDLE_GPU_METRICS_INTERVAL_MS: '1000',
      })
      return server
    }
    const png = readFileSync(new URL('../fixtures/images/hello-0.png', import.meta.url))
    const traffic = async (url: string) => {
      for (let i = 0; i < 5; i++)
        assert.equal(
          (await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png }))
            .status,
          200,
        )
      assert.equal(
        (await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' }))
          .status,
        415,
      )
    }
    const stops: (() => Promise<void>)[] = []
    after(async () => {
      for (const stop of stops.reverse()) await stop()
      await server?.stop()
    })

    it('every metric the dashboard queries is in /metrics, and rate()/increase() only wrap counters and histogram ' +
      'series', {
      timeout: 120_000,
    }, async () => {
      const { url } = await serve()
      await traffic(url)
      const text = await (await fetch(`${url}/metrics`)).text()
      const exported = new Set(parsePrometheus(text).map((s) => s.name))
      const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]))
      const missing = [...dashboardMetrics()].filter((n) => !exported.has(n))
      assert.deepEqual(missing, [], `the dashboard queries series /metrics does not have: ${missing.join(', ')}`)
      const family = (n: string) => (types.has(n) ? n : n.replace(/_(bucket|sum|count)$/, ''))
      for (const q of queries) {
        for (const [, fn, name] of q.expr.matchAll(/\b(rate|irate|increase|resets)\(\s*([a-zA-Z_:][\w:]*)/g)) {
          const type = types.get(family(name!))
          assert.ok(type === 'counter' || type === 'histogram', `${q.panel}: ${fn}() over ${name}, a ${type}`)
        }
      }
    })

    describe('on a real Prometheus', { skip: monitoring.skip }, () => {
      it('every panel query and variable query, with the variables filled in, succeeds and returns data', {
        timeout: 180_000,
      }, async () => {
        assert.ok(monitoring.present, 'prometheus and promtool are required here (BUNDLE_REQUIRE_MONITORING_TESTS=1)')
        const { url, port } = await serve()
        const prom = await startPrometheus([`127.0.0.1:${port}`])
        stops.push(prom.stop)
        // Requests while Prometheus scrapes, so rate() and the quantiles have something to show.
        await traffic(url)
        const throughput = queries.find(
          (q) => q.expr.includes('rate(bundle_request_total{') && !q.expr.includes('status=~'),
        )
        assert.ok(throughput, 'no throughput query')
        const served = (r: Series[]) =>
          r.some((s) => s.metric.endpoint === 'classify' && s.metric.status === '200' && Number(s.value?.[1]) > 0)
        await until(
          'the throughput panel shows the requests',
          async () => served(await prom.query(substitute(throughput.expr))),
          30_000,
        )
        await until(
          'the executed batches reach the latency histograms',
          async () =>
            (await prom.query('sum(bundle_runner_execution_duration_seconds_count{runner="ocr-cls"})'))[0]
              ?.value?.[1] !== '0',
          30_000,
        )

        // What a Grafana timeseries panel sends: a range query over the dashboard time range. It
        // ends now, not at a whole second, which could fall before the scrape the checks above saw.
        const end = Date.now() / 1000
        for (const q of queries) {
          const expr = substitute(q.expr)
          const r = await prom.get<{ resultType: string; result: Series[] }>('query_range', {
            query: expr,
            start: String(end - 120),
            end: String(end),
            step: '5',
          })
          assert.equal(r.status, 'success', `${q.panel} (${q.refId}): ${expr}\n${r.errorType}: ${r.error}`)
          assert.equal(r.data.resultType, 'matrix')
          assert.ok(r.data.result.length > 0, `${q.panel} (${q.refId}) returned no series: ${expr}`)
        }
        // Latency and batch quantiles come out as numbers, not NaN, once requests went through.
        for (const q of queries.filter((q) => q.expr.startsWith('histogram_quantile(0.5,'))) {
          const r = await prom.query(substitute(q.expr))
          assert.ok(
            r.some((s) => Number.isFinite(Number(s.value?.[1]))),
            `${q.panel}: ${JSON.stringify(r)}`,
          )
        }
        // The variable queries (Grafana turns label_values into the label values API).
        const wanted: Record<string, string> = { service: 'quickstart', runner: 'ocr-cls' }
        for (const v of variables.filter((v) => v.type === 'query')) {
          const { selector, label } = labelValuesQuery(v.query!)
          const r = await prom.get<string[]>(`label/${label}/values`, { 'match[]': substitute(selector) })
          assert.equal(r.status, 'success', `${v.name}: ${r.error}`)
          assert.ok(r.data.includes(wanted[v.name]!), `${v.name}: ${JSON.stringify(r.data)}`)
        }
        // The alert expressions docs/operations.md suggests parse, run, and name real series.
        const ops = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
        // A `|` inside a table cell is written `\|` (Markdown tables); PromQL gets the `|`.
        const alerts = [...ops.matchAll(/^\s*\| [^|]+ \| `((?:[^`\\]|\\.)+)` \| [^|]+ \|$/gm)].map((m) =>
          m[1]!.replace(/\\\|/g, '|'),
        )
        assert.ok(alerts.length >= 4, `alert rows found in docs/operations.md: ${alerts.length}`)
        const exported = await (await fetch(`${url}/metrics`)).text()
        for (const expr of alerts) {
          const r = await prom.get<unknown>('query', { query: expr })
          assert.equal(r.status, 'success', `docs/operations.md alert: ${expr}\n${r.errorType}: ${r.error}`)
          for (const [name] of expr.matchAll(/\bbundle_\w+/g))
            assert.match(exported, new RegExp(`^${name}[{ ]`, 'm'), `${expr}: ${name} is not on /metrics`)
        }
      })
    })
  })
})
