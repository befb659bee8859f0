// npm run bench:served — the served path against the server a user writes first (hono +
// onnxruntime-node, session.run per request: bench/fixtures/naive-onnx-server.ts), on the
// quickstart's two routes, with wrk as the load generator (a process of its own; it resends the
// moment it is answered, refused or not). Goodput counts 2xx answers only. Pairs run
// interleaved (A B A B …) and each row is the median round. Also: forced shedding (a deadline
// too tight for the load) against the default deadline, a simulated accelerator at 256
// connections against its ceiling, and the greeter against a bare hono app.
import { spawn } from 'node:child_process'
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import { accessLog } from '../framework/server/access-log.js'
import { LogSink } from '../framework/server/log-sink.js'
import { createMetrics } from '../framework/server/metrics.js'
import { MODELS } from '../test/utils/models.js'
import { interleaved } from './pair.js'
import { type Load, quickstartLoads } from './quickstart-loads.js'
import { fmt, machine, writeSection } from './results.js'
import { startServer, waitReady as ready } from './server.js'
import { hasWrk, wrk, type WrkResult } from './wrk.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart/service.ts', import.meta.url))
const GREETER = fileURLToPath(new URL('../examples/greeter/service.ts', import.meta.url))
const NAIVE = fileURLToPath(new URL('./fixtures/naive-onnx-server.ts', import.meta.url))
const BATCHED = fileURLToPath(new URL('./fixtures/batched-onnx-server.ts', import.meta.url))
const BARE = fileURLToPath(new URL('./fixtures/bare-hono.ts', import.meta.url))
const ACCEL = fileURLToPath(new URL('./fixtures/accel-service.ts', import.meta.url))
const RAW = fileURLToPath(new URL('./fixtures/raw-onnx.ts', import.meta.url))

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

if (!(await hasWrk())) {
  console.error('bench:served needs wrk (apt-get install wrk)')
  process.exit(1)
}

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-served-'))
const home = join(dir, 'home')
const greetFile = join(dir, 'greet.json')
writeFileSync(greetFile, JSON.stringify({ name: 'ada' }))
const itemFile = join(dir, 'item.json')
writeFileSync(itemFile, JSON.stringify({ x: 1 }))

const start = (args: string[], env: Record<string, string> = {}) => startServer(args, { BUNDLE_HOME: home, ...env })

const { TENSOR, IMAGE } = quickstartLoads(dir)
const JSON_BODY = (file: string) => ({ bodyFile: file, headers: { 'content-type': 'application/json' } })

const run = (url: string, load: Load, connections: number, seconds = SECONDS) =>
  wrk({ url, ...load, connections, seconds, threads: connections >= 16 ? 2 : 1 })
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** A against B under `load` (see interleaved): each side's median round and the median ratio. */
const pair = (a: string, b: string, load: Load, connections: number, rounds = ROUNDS) =>
  interleaved((url, seconds) => run(url, load, connections, seconds), a, b, rounds)
/** The pairs closest to each other (against the batched server) run more rounds: a median of five. */
const CLOSE_ROUNDS = Number(process.env.BENCH_CLOSE_ROUNDS ?? 5)

/** bench/fixtures/raw-onnx.ts in a process of its own: onnxruntime's rows a second by batch size. */
async function rawOnnx(): Promise<{ batch: number; inFlight: number; rowsPerSecond: number }[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', RAW], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, MODEL: MODELS.cls },
  })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`raw-onnx.ts exited with ${code}`)
  return JSON.parse(out)
}

interface Stages {
  server: Record<string, number>
  clientMs: number
  naiveMs: number
}
let stages: Record<'classify' | 'classifyTensor', Stages> | undefined

/**
 * Medians over sequential requests: each Server-Timing stage, the client's whole wait, and the
 * hand-written server's. The two servers take turns in blocks, not request by request: a server
 * whose onnxruntime threads spin on after each run (the hand-written one's, onnxruntime's default)
 * takes the cores from the next request the other serves — measured: alternating one by one
 * doubled modelbundle's wait (5.8 -> 13.6 ms on the PNG route) and slowed the hand-written one too.
 */
async function stagesOf(url: string, naiveUrl: string, load: Load, n = 400, block = 50): Promise<Stages> {
  const body = readFileSync(load.bodyFile)
  const once = async (u: string) => {
    const t = performance.now()
    const r = await fetch(u, { method: 'POST', headers: load.headers, body })
    await r.arrayBuffer()
    if (r.status !== 200) throw new Error(`${u}: ${r.status}`)
    return { ms: performance.now() - t, timing: r.headers.get('server-timing') ?? '' }
  }
  for (let i = 0; i < 100; i++) await once(url), await once(naiveUrl)
  const client: number[] = []
  const naive: number[] = []
  const byStage = new Map<string, number[]>()
  // Each block starts with a few untimed requests: the server it switched to settles first.
  const settle = 5
  for (let done = 0; done < n; done += block) {
    for (let i = 0; i < settle; i++) await once(url)
    for (let i = 0; i < block; i++) {
      const r = await once(url)
      client.push(r.ms)
      for (const part of r.timing.split(', ')) {
        const [name, dur] = part.split(';dur=')
        if (!byStage.has(name!)) byStage.set(name!, [])
        byStage.get(name!)!.push(Number(dur))
      }
    }
    for (let i = 0; i < settle; i++) await once(naiveUrl)
    for (let i = 0; i < block; i++) naive.push((await once(naiveUrl)).ms)
  }
  return {
    server: Object.fromEntries([...byStage].map(([k, v]) => [k, median(v)])),
    clientMs: median(client),
    naiveMs: median(naive),
  }
}

/** µs per call of `fn`, over many calls. */
function perCall(fn: (i: number) => void, n = 200_000): number {
  for (let i = 0; i < 20_000; i++) fn(i)
  const t = performance.now()
  for (let i = 0; i < n; i++) fn(i)
  return ((performance.now() - t) * 1000) / n
}

function stageTable(st: Record<'classify' | 'classifyTensor', Stages>): string {
  const metrics = createMetrics('bench', ['a']).endpoint('a')
  const metricsUs = perCall((i) => (metrics.begin(), metrics.end(200, i / 1e6)))
  const sink = new LogSink(openSync('/dev/null', 'w'))
  const line = accessLog(pino({ base: { service: 'bench' } }, sink), sink, 'bench')
  const logUs = perCall((i) => line('POST', '/classify', 200, i / 100, 'dd94fd4f-146f-4cd6-83ab-810531119cb6'))
  sink.end()
  const us = (ms: number | undefined) => (ms === undefined ? '–' : fmt(ms * 1000, 0))
  const row = (what: string, f: (s: Stages) => number | undefined) =>
    `| ${what} | ${us(f(st.classify))} | ${us(f(st.classifyTensor))} |`
  const rest = (s: Stages) => s.server.method! - s.server.queue! - s.server.transfer! - s.server.compute!
  return [
    '| stage (µs, median of 400 sequential requests, 50 a server in turn) | `/classify` (PNG) | `/classifyTensor` |',
    '|---|---|---|',
    row('read the body', (s) => s.server.read),
    row('decode and validate (PNG: decode + resize in one sharp pass)', (s) => s.server.decode),
    row('the method itself (preprocessing, building the tensor, reading the answer)', rest),
    row('runner queue (batch window)', (s) => s.server.queue),
    row('to the worker and back (IPC message, tensor bytes via /dev/shm, the worker’s turn)', (s) => s.server.transfer),
    row('compute in the worker (onnxruntime run, as the worker timed it)', (s) => s.server.compute),
    row('encode the answer', (s) => s.server.encode),
    row('HTTP in and out, and the client (its wait less the server’s total)', (s) => s.clientMs - s.server.total!),
    `| metrics (4 series; after the answer, timed alone) | ${fmt(metricsUs, 1)} | ${fmt(metricsUs, 1)} |`,
    `| access log line (after the answer, timed alone) | ${fmt(logUs, 1)} | ${fmt(logUs, 1)} |`,
    row('**the client’s wait, modelbundle**', (s) => s.clientMs),
    row('**the client’s wait, hand-written server**', (s) => s.naiveMs),
  ].join('\n')
}

const RUNS = Number(process.env.BENCH_RUNS ?? 3)

/** One row's outcome in one run; `met` is a target's verdict, or a word for a row with none. */
interface Cell {
  ours: string
  theirs: string
  ratio: string
  met: boolean | string
}
const results = new Map<string, { target: string; cells: Cell[] }>()
/** A table row's outcome in this run; rows measured in every run gather one cell per run. */
const line = (measure: string, ours: string, theirs: string, ratio: string, target: string, met: boolean | string) => {
  const r = results.get(measure) ?? { target, cells: [] }
  r.cells.push({ ours, theirs, ratio, met })
  results.set(measure, r)
}
/** The table: the last run's cells, every run's ratio, and a verdict that holds only if every run met it. */
function tableRows(): string[] {
  return [...results].map(([measure, { target, cells }]) => {
    const last = cells.at(-1)!
    const ratios = cells.map((c) => c.ratio).join(' · ')
    const missed = cells.filter((c) => c.met === false).length
    const verdict =
      typeof last.met === 'string'
        ? last.met
        : missed > 0
          ? `**missed** in ${missed} of ${cells.length}`
          : cells.length > 1
            ? `met in all ${cells.length}`
            : 'met'
    return `| ${measure} | ${last.ours} | ${last.theirs} | ${ratios} | ${target} | ${verdict} |`
  })
}
const good = (r: WrkResult) =>
  `${fmt(r.goodput, 0)}/s${r.refused ? ` (${fmt(r.refused / r.seconds, 0)}/s refused)` : ''}`

/** One connection on each route: modelbundle's p50 over the naive server's (`label` tags the rows). */
async function oneConnection(mbUrl: string, naiveUrl: string, label: string): Promise<void> {
  for (const [route, load] of [
    ['classify', IMAGE],
    ['classifyTensor', TENSOR],
  ] as const) {
    const one = await pair(`${mbUrl}/${route}`, `${naiveUrl}/${route}`, load, 1)
    const over = one.a.p50Ms - one.b.p50Ms
    line(
      `\`/${route}\`, 1 connection${label}: p50`,
      `${fmt(one.a.p50Ms, 2)} ms`,
      `${fmt(one.b.p50Ms, 2)} ms`,
      `${over >= 0 ? '+' : ''}${fmt(over, 2)} ms`,
      '≤ +0.5 ms',
      over <= 0.5,
    )
  }
}

/**
 * The rows the targets are about, on servers started for this run: c=32 goodput against both
 * hand-written servers, c=1 latency, forced shedding. Returns the naive server's tensor goodput.
 */
async function targetRun(): Promise<number> {
  const naive = await start(['--import', 'tsx', NAIVE], { MODEL: MODELS.cls })
  const batched = await start(['--import', 'tsx', BATCHED], { MODEL: MODELS.cls })
  // `npm start`'s server: the quickstart with its defaults, access log on.
  const mb = await start([BIN, 'serve', QUICKSTART, '--port', '0'])
  await ready(mb.url)
  const png32 = await pair(`${mb.url}/classify`, `${naive.url}/classify`, IMAGE, 32)
  line(
    'PNG `/classify`, 32 connections: goodput',
    good(png32.a),
    good(png32.b),
    `${fmt(png32.ratio, 2)}×`,
    '≥ 1.0×, zero refusals',
    png32.ratio >= 1 && png32.a.refused === 0,
  )
  const t32 = await pair(`${mb.url}/classifyTensor`, `${naive.url}/classifyTensor`, TENSOR, 32)
  line(
    'tensor `/classifyTensor` [1,3,48,192], 32 connections: goodput',
    good(t32.a),
    good(t32.b),
    `${fmt(t32.ratio, 2)}×`,
    '≥ 1.0×',
    t32.ratio >= 1,
  )
  // The fairer ceiling: the hand-written server with a batcher of its own.
  for (const [route, load, what] of [
    ['classify', IMAGE, 'PNG `/classify`'],
    ['classifyTensor', TENSOR, 'tensor `/classifyTensor`'],
  ] as const) {
    const vs = await pair(`${mb.url}/${route}`, `${batched.url}/${route}`, load, 32, CLOSE_ROUNDS)
    line(
      `${what}, 32 connections: goodput vs the hand-written server with a batcher`,
      good(vs.a),
      good(vs.b),
      `${fmt(vs.ratio, 2)}×`,
      '≥ 0.95×',
      vs.ratio >= 0.95,
    )
  }
  batched.child.kill('SIGTERM')
  await oneConnection(mb.url, naive.url, '')
  // Forced shedding: deadlines the 32 resending clients cannot all make, against the default.
  // At 20 ms even the batch sizes that fit serve fewer rows a second (a 16-row batch takes
  // ~21 ms here); at 50 ms they fit, and only the refusals' cost separates it from the default.
  for (const ms of [20, 30, 50]) {
    const tight = await start([BIN, 'serve', QUICKSTART, '--port', '0'], {
      BUNDLE_RUNNER_OCR_CLS_DEADLINE_MS: String(ms),
    })
    await ready(tight.url)
    const shed = await pair(`${tight.url}/classifyTensor`, `${mb.url}/classifyTensor`, TENSOR, 32)
    line(
      `forced shedding (${ms} ms deadline), 32 resending clients: goodput vs the default deadline`,
      good(shed.a),
      good(shed.b),
      `${fmt(shed.ratio, 2)}×`,
      '≥ 0.8×',
      shed.ratio >= 0.8,
    )
    tight.child.kill('SIGTERM')
  }
  for (const s of [naive, mb]) s.child.kill('SIGTERM')
  return t32.b.goodput
}

/**
 * What forced shedding costs a hand-written server on this host: the one with a batcher, given the
 * same deadline (DEADLINE_MS: it refuses on arrival what the rows ahead would not let finish in
 * time, at its last batch's pace), against itself without one. It answers late ones anyway (no
 * deadline is enforced once admitted), so its ratio flatters it: a reference for the targets.
 */
async function handWrittenShedding(): Promise<void> {
  const loose = await start(['--import', 'tsx', BATCHED], { MODEL: MODELS.cls })
  for (const ms of [20, 30]) {
    const tight = await start(['--import', 'tsx', BATCHED], { MODEL: MODELS.cls, DEADLINE_MS: String(ms) })
    const shed = await pair(`${tight.url}/classifyTensor`, `${loose.url}/classifyTensor`, TENSOR, 32)
    line(
      `the hand-written server with a batcher, shedding at ${ms} ms, 32 resending clients: goodput vs itself ` +
        'without a deadline',
      `${good(shed.a)}, p99 ${fmt(shed.a.p99Ms)} ms`,
      good(shed.b),
      `${fmt(shed.ratio, 2)}×`,
      'what forced shedding costs without the framework',
      'reference',
    )
    tight.child.kill('SIGTERM')
  }
  loose.child.kill('SIGTERM')
}

/**
 * Forced shedding held for a minute: six 10 s windows at a tight deadline on one server that stays
 * up throughout, each followed by a 10 s window of the default deadline (and one before the first),
 * so every tight window is compared with the loose goodput measured just around it — a machine
 * that slows down for a while slows both sides of that comparison. The row's ratio is the lowest
 * window's (no collapse: every window counts; a collapse shows as ratios falling window by window).
 */
async function sheddingMinute(ms: number): Promise<void> {
  const mb = await start([BIN, 'serve', QUICKSTART, '--port', '0'])
  const tight = await start([BIN, 'serve', QUICKSTART, '--port', '0'], {
    BUNDLE_RUNNER_OCR_CLS_DEADLINE_MS: String(ms),
  })
  await ready(mb.url)
  await ready(tight.url)
  await run(`${mb.url}/classifyTensor`, TENSOR, 32, 2)
  await run(`${tight.url}/classifyTensor`, TENSOR, 32, 2)
  const loose: WrkResult[] = [await run(`${mb.url}/classifyTensor`, TENSOR, 32, 10)]
  const windows: WrkResult[] = []
  for (let i = 0; i < 6; i++) {
    windows.push(await run(`${tight.url}/classifyTensor`, TENSOR, 32, 10))
    loose.push(await run(`${mb.url}/classifyTensor`, TENSOR, 32, 10))
  }
  for (const s of [mb, tight]) s.child.kill('SIGTERM')
  const ratios = windows.map((w, i) => w.goodput / Math.max((loose[i]!.goodput + loose[i + 1]!.goodput) / 2, 1e-9))
  const low = ratios.indexOf(Math.min(...ratios))
  line(
    `forced shedding (${ms} ms deadline), six 10 s windows in a minute: the lowest window vs the default ` +
      'deadline around it',
    `${good(windows[low]!)}; windows ${windows.map((w) => fmt(w.goodput, 0)).join(', ')}`,
    `loose windows ${loose.map((w) => fmt(w.goodput, 0)).join(', ')}; ` +
      `ratios ${ratios.map((r) => fmt(r, 2)).join(', ')}`,
    `${fmt(ratios[low]!, 2)}×`,
    '≥ 0.8×, no collapse',
    ratios[low]! >= 0.8,
  )
}

/** Rows measured once: onnxruntime's own ceiling, thread isolation, the accelerator, the greeter, stages. */
async function onceRows(naiveTensorGoodput: number): Promise<void> {
  // What batching can give at most on this machine: onnxruntime alone at its best batch size,
  // with no HTTP at all, against the hand-written server's goodput in this run.
  const raw = await rawOnnx()
  const best = raw.reduce((x, y) => (y.rowsPerSecond > x.rowsPerSecond ? y : x))
  const single = raw.find((r) => r.batch === 1 && r.inFlight === 1)!
  line(
    'onnxruntime alone (no HTTP, no queue), its best batch: rows/s vs the hand-written server above',
    `${fmt(best.rowsPerSecond, 0)}/s (batch ${best.batch}, ${best.inFlight} in flight; batch 1: ` +
      `${fmt(single.rowsPerSecond, 0)}/s)`,
    `${fmt(naiveTensorGoodput, 0)}/s`,
    `${fmt(best.rowsPerSecond / naiveTensorGoodput, 2)}×`,
    'the most the tensor ratio can reach here',
    'reference',
  )
  const naive = await start(['--import', 'tsx', NAIVE], { MODEL: MODELS.cls })
  // The same runner in worker threads of the API process (isolation: 'thread', an opt-in).
  const mbt = await start([BIN, 'serve', QUICKSTART, '--port', '0'], { BUNDLE_RUNNER_OCR_CLS_ISOLATION: 'thread' })
  await ready(mbt.url)
  const tp32 = await pair(`${mbt.url}/classify`, `${naive.url}/classify`, IMAGE, 32)
  line(
    "PNG `/classify`, 32 connections, `isolation: 'thread'`: goodput",
    good(tp32.a),
    good(tp32.b),
    `${fmt(tp32.ratio, 2)}×`,
    '≥ 1.0×, zero refusals',
    tp32.ratio >= 1 && tp32.a.refused === 0,
  )
  const tt32 = await pair(`${mbt.url}/classifyTensor`, `${naive.url}/classifyTensor`, TENSOR, 32)
  line(
    "tensor `/classifyTensor`, 32 connections, `isolation: 'thread'`: goodput",
    good(tt32.a),
    good(tt32.b),
    `${fmt(tt32.ratio, 2)}×`,
    '≥ 1.15×',
    tt32.ratio >= 1.15,
  )
  await oneConnection(mbt.url, naive.url, ", `isolation: 'thread'`")
  mbt.child.kill('SIGTERM')
  naive.child.kill('SIGTERM')
  await handWrittenShedding()

  // A simulated accelerator: 20 ms + 0.25 ms a row, at most 64 rows, one worker.
  const accel = await start([BIN, 'serve', ACCEL, '--port', '0'])
  await ready(accel.url)
  const ceiling = (64 / (20 + 0.25 * 64)) * 1000
  await run(`${accel.url}/infer`, JSON_BODY(itemFile), 256, 2)
  const accelRuns: WrkResult[] = []
  for (let i = 0; i < ROUNDS; i++) accelRuns.push(await run(`${accel.url}/infer`, JSON_BODY(itemFile), 256))
  const a = [...accelRuns].sort((x, y) => x.goodput - y.goodput)[Math.floor(accelRuns.length / 2)]!
  line(
    'simulated accelerator, 256 connections: rows/s vs its ceiling',
    `${good(a)}, p99 ${fmt(a.p99Ms, 0)} ms`,
    `ceiling ${fmt(ceiling, 0)}/s`,
    `${fmt(a.goodput / ceiling, 2)}×`,
    '≥ 0.9×, p99 within the deadline (10 s)',
    a.goodput / ceiling >= 0.9 && a.p99Ms <= 10_000,
  )
  accel.child.kill('SIGTERM')

  // The HTTP path alone: the greeter (access log on, as by default) against a bare hono app.
  const bare = await start(['--import', 'tsx', BARE])
  const greeter = await start([BIN, 'serve', GREETER, '--port', '0'])
  await ready(greeter.url)
  const g = await pair(`${greeter.url}/greet`, `${bare.url}/greet`, JSON_BODY(greetFile), 16)
  line(
    'greeter echo vs bare hono, 16 connections, access log on',
    good(g.a),
    good(g.b),
    `${fmt(g.ratio, 2)}×`,
    '≥ 0.85×',
    g.ratio >= 0.85,
  )
  for (const s of [bare, greeter]) s.child.kill('SIGTERM')

  // Where the time of one request goes, at one connection: the server's own Server-Timing
  // header (BUNDLE_SERVER_TIMING=1) for its stages, medians of sequential requests from this
  // process; metrics and the access log timed alone (they run after the answer is sent).
  const timed = await start([BIN, 'serve', QUICKSTART, '--port', '0'], { BUNDLE_SERVER_TIMING: '1' })
  const naive2 = await start(['--import', 'tsx', NAIVE], { MODEL: MODELS.cls })
  await ready(timed.url)
  stages = {
    classify: await stagesOf(`${timed.url}/classify`, `${naive2.url}/classify`, IMAGE),
    classifyTensor: await stagesOf(`${timed.url}/classifyTensor`, `${naive2.url}/classifyTensor`, TENSOR),
  }
  for (const s of [timed, naive2]) s.child.kill('SIGTERM')
}

try {
  let naiveTensor = 0
  for (let i = 0; i < RUNS; i++) {
    console.log(`run ${i + 1} of ${RUNS}`)
    naiveTensor = await targetRun()
  }
  for (const ms of [20, 30, 50]) await sheddingMinute(ms)
  await onceRows(naiveTensor)
} finally {
  rmSync(dir, { recursive: true, force: true })
}

const table =
  `| measure | modelbundle (last run) | hand-written / reference (last run) | ratio, run by run | target | |\n` +
  `|---|---|---|---|---|---|\n${tableRows().join('\n')}`
const breakdown = stages
  ? `\n\n### Where the time of one request goes\n\nThe quickstart served with \`BUNDLE_SERVER_TIMING=1\` (each ` +
    `answer's Server-Timing header gives its stages); one request at a time from this process (fetch), against the ` +
    `hand-written server the same way.\n\n${stageTable(stages)}\n`
  : ''
writeSection(
  'served',
  `## The served path against the hand-written server (\`npm run bench:served\`)\n\n${machine()}. wrk (keep-alive, ` +
    `closed loop: each connection resends the moment it is answered, refused or not) in a process of its own, on ` +
    `the same cores as the servers; goodput counts 2xx answers only. ${RUNS} runs in a row of the rows the ` +
    `targets are about (fresh servers each run; a verdict holds only if every run met it), the others once. ` +
    `${SECONDS} s windows after a 2 s warm-up, ` +
    `${ROUNDS} rounds per pair run interleaved (${CLOSE_ROUNDS} against the server with a batcher); each cell ` +
    `is the median round, each ratio the median of per-round ratios. Shedding for a minute alternates 10 s ` +
    `windows of the tight and the default deadline. The hand-written server is ` +
    `bench/fixtures/naive-onnx-server.ts (hono, sharp, session.run per request ` +
    `in the HTTP process); the one with a batcher, bench/fixtures/batched-onnx-server.ts (the same, with requests ` +
    `queued while a run is in flight and the next run taking all that is queued); modelbundle is ` +
    `\`bundle serve examples/quickstart/service.ts\` with \`npm start\`'s ` +
    `defaults (access log on); rows marked \`isolation: 'thread'\` run the same runner in worker threads of the ` +
    `API process (\`BUNDLE_RUNNER_OCR_CLS_ISOLATION=thread\`).\n\n${table}\n${breakdown}`,
)
console.log(table + breakdown)
