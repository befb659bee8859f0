// npm run bench:autoscale — does the autoscaling query give a replica count that holds the p99
// bound? A real Prometheus scrapes every replica each second (file-based discovery, as
// Kubernetes' pod discovery), `bundle bench` (a process of its own) steps an open-loop load up
// and down through a round-robin proxy (test/utils/round-robin-proxy.ts, a Service's part), and
// a controller plays KEDA's HPA: every 14 s it reads the query `bundle deploy k8s --autoscale
// queue` puts in its ScaledObject and sets ceil(value ÷ threshold) replicas, unless the value is
// within 10% of the current count's (the HPA's tolerance). Replicas it adds are started and join
// once ready; one it removes leaves the proxy first, finishes what it was answering (the preStop
// wait), then gets SIGTERM. After 45 s of a step the count is left alone and the step is
// measured: goodput, p99 against the 250 ms deadline, and every non-2xx answer of the whole step
// (scaling included) from the proxy's counts.
//
// The replicas are device-bound (bench/fixtures/autoscale-service.ts: a simulated accelerator
// that sleeps, about 180 rows/s each), so several on this 2-core host add capacity as GPU
// replicas would; CPU-bound replicas would share the same two cores and measure the host instead.
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_TARGET, queueAutoscaler } from '../builder/k8s-autoscale.js'
import { startPrometheus } from '../test/utils/prometheus.js'
import { proxyStats, putBackends, type ProxyStats } from '../test/utils/round-robin-proxy.js'
import { fmt, machine, writeSection } from './results.js'
import { type Server, startServer, waitReady } from './server.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const SERVICE = fileURLToPath(new URL('./fixtures/autoscale-service.ts', import.meta.url))
const PROXY = fileURLToPath(new URL('../test/utils/round-robin-proxy.ts', import.meta.url))
/** The fixture's deadline: the p99 each step must hold. */
const P99_BOUND_MS = 250
const MAX_REPLICAS = 6
/** Requests per second, up and down. */
const STEPS = (process.env.BENCH_AUTOSCALE_STEPS ?? '60,150,300,480,300,80').split(',').map(Number)
/** When the controller reads the query, from a step's start (the load's 10 s window filled each time). */
const TICKS_MS = [12_000, 26_000, 40_000]
const WARMUP_MS = 45_000
const WINDOW_MS = 5_000

// The query and threshold exactly as the generated ScaledObject carries them.
const scaled = queueAutoscaler({ name: 'autoscale', labels: {}, annotations: {} }, 'autoscale', {
  min: 1,
  max: MAX_REPLICAS,
  threshold: DEFAULT_TARGET.queue,
  prometheus: 'http://prometheus:9090',
  service: 'autoscale',
}) as { spec: { triggers: { metadata: { query: string; threshold: string } }[] } }
const { query, threshold: thresholdText } = scaled.spec.triggers[0]!.metadata
const threshold = Number(thresholdText)

/** The HPA's rule for an AverageValue metric: keep the count within 10%, else ceil(value ÷ target), in bounds. */
function hpaReplicas(value: number, current: number, target: number): number {
  if (Math.abs(value / (target * current) - 1) <= 0.1) return current
  return Math.min(MAX_REPLICAS, Math.max(1, Math.ceil(value / target)))
}

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-autoscale-'))
const item = join(dir, 'item.json')
writeFileSync(item, JSON.stringify({ x: 1 }))
const hostPort = (url: string) => new URL(url).host
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

const proxy = await startServer(['--import', 'tsx', PROXY])
const replicas: Server[] = []

async function startReplica(): Promise<Server> {
  const s = await startServer([BIN, 'serve', SERVICE, '--port', '0'], { BUNDLE_ACCESS_LOG: '0' })
  await waitReady(s.url)
  return s
}

replicas.push(await startReplica())
const prometheus = await startPrometheus(
  replicas.map((r) => hostPort(r.url)),
  'autoscale',
)

/** Endpoints changed: the proxy and Prometheus see the replicas there are now. */
async function publish(): Promise<void> {
  await putBackends(
    proxy.url,
    replicas.map((r) => r.url),
  )
  prometheus.setTargets(replicas.map((r) => hostPort(r.url)))
}

await publish()

/** Non-2xx answers the proxy gave between two of its counts. */
const failed = (a: ProxyStats, b: ProxyStats) =>
  Object.entries(b.statuses).reduce((n, [s, c]) => n + (s.startsWith('2') ? 0 : c - (a.statuses[s] ?? 0)), 0)
/** Non-2xx answers while replicas were leaving (from the proxy letting go to the process gone). */
let leaving = 0

async function scaleTo(n: number): Promise<void> {
  if (n > replicas.length) {
    replicas.push(...(await Promise.all(Array.from({ length: n - replicas.length }, startReplica))))
    await publish()
  }
  while (replicas.length > n) {
    const gone = replicas.pop()!
    const before = await proxyStats(proxy.url)
    await publish()
    // The preStop wait: what the proxy had sent it finishes before it is told to stop.
    for (let i = 0; i < 100 && ((await proxyStats(proxy.url)).inFlight[gone.url] ?? 0) > 0; i++) await sleep(50)
    const exited = new Promise((r) => gone.child.once('exit', r))
    gone.child.kill('SIGTERM')
    await exited
    leaving += failed(before, await proxyStats(proxy.url))
  }
}

async function readQuery(): Promise<number> {
  const r = await prometheus.query(query)
  return Number(r[0]?.value?.[1] ?? 0)
}

interface BenchStats {
  goodput: number
  refused: number
  errors: number
  p99: number
}

/** `bundle bench` at `rate` through the proxy: resolves with its measured stats when it ends. */
function load(rate: number): Promise<BenchStats> {
  const args = [BIN, 'bench', proxy.url, '--api', '/infer', '--input', item, '--rate', String(rate)]
  args.push('--warmup', String(WARMUP_MS), '--window', String(WINDOW_MS), '--max-windows', '3', '-o', 'json')
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => void (out += c))
  return new Promise((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0
        ? resolve((JSON.parse(out) as { stats: BenchStats }[])[0]!.stats)
        : reject(new Error(`bundle bench exited ${code}`)),
    ),
  )
}

interface Row {
  rate: number
  /** Replicas at each tick, and the value read there. */
  trace: string
  value: number
  replicas: number
  stats: BenchStats
  /** Non-2xx in the step: refused while too few replicas served, and while one was leaving. */
  refused: number
  leaving: number
}

async function step(rate: number): Promise<Row> {
  const before = await proxyStats(proxy.url)
  const leftBefore = leaving
  const started = Date.now()
  const measured = load(rate)
  let trace = String(replicas.length)
  let value = 0
  for (const tick of TICKS_MS) {
    await sleep(started + tick - Date.now())
    value = await readQuery()
    const want = hpaReplicas(value, replicas.length, threshold)
    if (want !== replicas.length) await scaleTo(want)
    trace += ` →[${fmt(value, 2)}] ${replicas.length}`
  }
  const stats = await measured
  const all = failed(before, await proxyStats(proxy.url))
  const r = { rate, trace, value, replicas: replicas.length, stats, refused: all - (leaving - leftBefore) }
  const row = { ...r, leaving: leaving - leftBefore }
  process.stderr.write(`${JSON.stringify(row)}\n`)
  return row
}

const rows: Row[] = []
try {
  for (const rate of STEPS) rows.push(await step(rate))
  // The control: the peak load on one replica, as with no autoscaler.
  await scaleTo(1)
  const peak = Math.max(...STEPS)
  const before = await proxyStats(proxy.url)
  const alone = await load(peak)
  const control = { rate: peak, stats: alone, failed: failed(before, await proxyStats(proxy.url)) }

  const holds = (rate: number, st: BenchStats) => st.p99 <= P99_BOUND_MS && st.goodput >= 0.98 * rate
  const line = (r: Row) =>
    `| ${r.rate} | ${r.trace} | ${fmt(r.value, 2)} | ${r.replicas} | ${fmt(r.stats.goodput)} | ` +
    `${fmt(r.stats.p99)} | ${holds(r.rate, r.stats) ? 'yes' : '**no**'} | ${r.refused} | ${r.leaving} |`
  const table = [
    '| load (req/s) | replicas [query value read] at 12, 26, 40 s | query value | replicas measured | goodput/s | ' +
      'p99 ms | p99 ≤ 250 ms and goodput ≥ 98% | refused before the count caught up | non-2xx while a replica left |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map(line),
    `| ${control.rate} | 1, no autoscaler | | 1 | ${fmt(control.stats.goodput)} | ${fmt(control.stats.p99)} | ` +
      `${holds(control.rate, control.stats) ? 'yes' : 'no'} | ${control.failed} | |`,
  ].join('\n')
  process.stdout.write(`${table}\n`)
  writeSection(
    'autoscale',
    `## Autoscaling on the queue query (bench:autoscale)

${machine()}. Replicas of a device-bound service (simulated accelerator, ≤ 4 rows a batch, 250 ms
deadline, about 180 rows/s each) behind a round-robin proxy; Prometheus scraping each every 1 s;
the load from \`bundle bench --rate\` (open loop), each step ${WARMUP_MS / 1000} s of scaling, then
${(3 * WINDOW_MS) / 1000} s measured. The controller reads \`${query}\` — the ScaledObject's query —
at ${TICKS_MS.map((t) => `${t / 1000}`).join(', ')} s of each step and sets ceil(value ÷ ${threshold})
replicas (the ScaledObject's threshold), keeping the count while the value is within 10% of it
(the HPA's tolerance); scale-down without the HPA's 300 s stabilization, so a step fits in a minute.
A removed replica leaves the proxy, finishes its requests, then gets SIGTERM. "Query value" is the
last one read. Every answer of the step is counted, scaling included: refusals while the load
outgrew the replicas there were (shed at once, as a 503, until the next read added more), and any
failure while a replica left (the drain: there should be none).

${table}`,
  )
} finally {
  await prometheus.stop()
  for (const r of replicas) r.child.kill('SIGTERM')
  proxy.child.kill('SIGTERM')
}
