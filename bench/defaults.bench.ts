// npm run bench:defaults — each runner default against the settings it was chosen over, on the
// quickstart (`npm start`'s service) under wrk: process or thread workers, the shared-memory file
// or inline IPC, the batch window, one worker or two, onnxruntime's threads. Each alternative runs interleaved with the
// default (A B B A …) so both see the same machine; docs/defaults.md reads its rules from here.
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { interleaved } from './pair.js'
import { quickstartLoads } from './quickstart-loads.js'
import { defaultCpuWorkers, defaultIntraOpThreads, physicalCores } from '../runners/onnx/threads.js'
import { MODELS } from '../test/utils/models.js'
import { fmt, machine, writeSection } from './results.js'
import { startServer, waitReady } from './server.js'
import { hasWrk, wrk } from './wrk.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart/service.ts', import.meta.url))
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)

if (!(await hasWrk())) {
  console.error('bench:defaults needs wrk (apt-get install wrk)')
  process.exit(1)
}

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-defaults-'))
const { TENSOR, IMAGE } = quickstartLoads(dir)

// The quickstart's model, as its service imports it: the workers default depends on its size.
const WORKERS = defaultCpuWorkers(statSync(MODELS.cls).size)

/** What each default was chosen over: the setting and the environment that gives it. */
const ALTERNATIVES: { knob: string; setting: string; env: Record<string, string> }[] = [
  { knob: 'isolation', setting: '`thread` (default `process`)', env: { BUNDLE_RUNNER_OCR_CLS_ISOLATION: 'thread' } },
  { knob: 'transport', setting: 'inline IPC (default: the file from 64 KiB)', env: { BUNDLE_IPC_SHM: '0' } },
  {
    knob: 'batch window',
    setting: '`maxDelayMs: 0` (default 10)',
    env: { BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_DELAY_MS: '0' },
  },
  {
    knob: 'batch window',
    setting: '`maxDelayMs: 2` (default 10)',
    env: { BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_DELAY_MS: '2' },
  },
  {
    knob: 'batch window',
    setting: '`maxDelayMs: 30` (default 10)',
    env: { BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_DELAY_MS: '30' },
  },
  ...(WORKERS === 1
    ? []
    : [
        {
          knob: 'workers',
          setting: `\`workers: 1\` (default ${WORKERS})`,
          env: { BUNDLE_RUNNER_OCR_CLS_WORKERS: '1' },
        },
      ]),
  // onnxruntime's own default is a thread per physical core; where that is the default already
  // (one core with two hyper-threads), there is nothing to compare.
  ...(physicalCores() === defaultIntraOpThreads(WORKERS)
    ? []
    : [
        {
          knob: 'model threads',
          setting:
            `\`intraOpThreads: ${physicalCores()}\`, onnxruntime's own ` +
            `(default ${defaultIntraOpThreads(WORKERS)})`,
          env: { BUNDLE_RUNNER_OCR_CLS_INTRA_OP_THREADS: String(physicalCores()) },
        },
      ]),
]

// BENCH_ONLY=window (a part of a knob's name) measures only those alternatives, and writes nothing.
const ONLY = process.env.BENCH_ONLY
const alternatives = ONLY ? ALTERNATIVES.filter((a) => a.knob.includes(ONLY)) : ALTERNATIVES

const LOADS = [
  { name: 'tensor, 1 connection: p50', route: 'classifyTensor', load: TENSOR, connections: 1 },
  { name: 'tensor, 32 connections: goodput', route: 'classifyTensor', load: TENSOR, connections: 32 },
  { name: 'PNG, 32 connections: goodput', route: 'classify', load: IMAGE, connections: 32 },
] as const

const serve = async (env: Record<string, string>) => {
  const s = await startServer([BIN, 'serve', QUICKSTART, '--port', '0'], { BUNDLE_HOME: join(dir, 'home'), ...env })
  await waitReady(s.url)
  return s
}

const rows: string[] = []
const base = await serve({})
try {
  const baseline: string[] = []
  for (const [i, alt] of alternatives.entries()) {
    const other = await serve(alt.env)
    const cells: string[] = []
    for (const l of LOADS) {
      const run = (url: string, seconds = SECONDS) =>
        wrk({
          url: `${url}/${l.route}`,
          ...l.load,
          connections: l.connections,
          seconds,
          threads: l.connections >= 16 ? 2 : 1,
        })
      const r = await interleaved(run, other.url, base.url, ROUNDS)
      if (l.connections === 1) {
        const d = r.a.p50Ms - r.b.p50Ms
        cells.push(`${fmt(r.a.p50Ms, 2)} ms (${d >= 0 ? '+' : ''}${fmt(d, 2)})`)
        if (i === 0) baseline.push(`${fmt(r.b.p50Ms, 2)} ms`)
      } else {
        cells.push(`${fmt(r.a.goodput, 0)}/s (${fmt(r.ratio, 2)}×)`)
        if (i === 0) baseline.push(`${fmt(r.b.goodput, 0)}/s`)
      }
      console.log(alt.setting, l.name, cells.at(-1))
    }
    other.child.kill('SIGTERM')
    if (i === 0) rows.push(`| — | the defaults | ${baseline.join(' | ')} |`)
    rows.push(`| ${alt.knob} | ${alt.setting} | ${cells.join(' | ')} |`)
  }
} finally {
  base.child.kill('SIGTERM')
  rmSync(dir, { recursive: true, force: true })
}

if (!ONLY)
  writeSection(
    'defaults',
    `## Each default against what it was chosen over (\`npm run bench:defaults\`)\n\n${machine()}. The quickstart ` +
      `(\`npm start\`'s service, access log on) with one setting changed, interleaved with the defaults under the ` +
      `same load (wrk, closed loop, ${ROUNDS} rounds of ${SECONDS} s; each cell the median round, in brackets the ` +
      `difference from the defaults (p50) or the median per-round ratio to them (goodput)). The rules these numbers ` +
      `feed are in docs/defaults.md.\n\n` +
      `| knob | setting | ${LOADS.map((l) => l.name).join(' | ')} |\n|---|---|${LOADS.map(() => '---|').join('')}\n` +
      rows.join('\n'),
  )
console.log(rows.join('\n'))
