// What `bundle tune` does, step by step (cli/tune.ts declares the command and loads this lazily):
// read the runner's settings now, search candidates measuring each over a load sweep, report.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { BundleError } from '../errors/index.js'
import { measureStep } from '../framework/client/bench/drive.js'
import { filePayloads } from '../framework/client/bench/inputs.js'
import { prepareTarget } from '../framework/client/bench/index.js'
import { parseRange } from '../framework/client/bench/range.js'
import { type Candidate, ranked, type Score, search, type Trial } from '../framework/client/bench/search.js'
import { realClock } from '../runners/index.js'
import { table, write } from './output.js'
import { describe, positive, runnerConfig, type TuneFlags } from './tune-flags.js'
import { start } from './tune-server.js'

/** One tuning run: the flags read and checked, the load each candidate gets, the clock it runs against. */
interface Run {
  entry: string
  opts: TuneFlags
  p99: number | undefined
  minThroughput: number | undefined
  windowMs: number
  maxWindows: number
  steps: number[]
  key: string | undefined
  began: number
  deadline: number
  dir: string
  say(line: string): void
}

type Load = Parameters<typeof prepareTarget>[0] extends infer T ? Omit<T, 'url'> : never

const infeasible: Score = { feasible: false, goodput: 0, p99: Infinity, concurrency: 0 }

/** `bundle tune ENTRY --runner NAME`; see tuneCommand. */
export async function runTune(entry: string, opts: TuneFlags): Promise<void> {
  const budgetMs = positive('--budget', opts.budget)! * 60_000
  const began = Date.now()
  const run: Omit<Run, 'dir'> = {
    entry,
    opts,
    p99: positive('--p99', opts.p99),
    minThroughput: positive('--min-throughput', opts.minThroughput),
    windowMs: positive('--window', opts.window)!,
    maxWindows: Math.max(3, Math.round(positive('--max-windows', opts.maxWindows)!)),
    steps: parseRange('--concurrency', opts.concurrency, { integer: true }),
    key: opts.apiKey ?? process.env.BUNDLE_API_KEY,
    began,
    deadline: began + budgetMs,
    say: (line) => process.stderr.write(`${line}\n`),
  }
  checkLoadFlags(opts)
  const dir = mkdtempSync(join(tmpdir(), 'bundle-tune-'))
  try {
    await tune({ ...run, dir })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The load's flags are checked before any server starts. */
function checkLoadFlags(opts: TuneFlags): void {
  if (opts.input !== undefined && opts.api === undefined)
    throw new BundleError('E_CLI_USAGE', '--input goes with --api (a service API); the model gets tensors of --shape')
  if (opts.api !== undefined && opts.input === undefined && opts.shape === undefined)
    throw new BundleError('E_CLI_USAGE', '--api needs its request body: --input FILE|DIR, or --shape DIMS')
  if (opts.input !== undefined) filePayloads(opts.input, opts.contentType)
}

async function tune(run: Run): Promise<void> {
  const { now, shapes } = await settingsNow(run)
  const { opts } = run
  const load: Load = {
    ...(opts.api !== undefined ? { api: opts.api } : { model: opts.runner }),
    ...(opts.input !== undefined ? { input: opts.input } : {}),
    ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
    ...(shapes ? { shapes } : {}),
    ...(run.key ? { key: run.key } : {}),
  }
  let trialNo = 0
  let slowest = 0
  // Rows per request: a batch smaller than that would refuse every request.
  const perRequest = opts.api === undefined && shapes?.length ? Number(shapes[0]!.split('=').pop()!.split(',')[0]) : 1
  const trials = await search({
    start: now,
    cores: cpus().length,
    ...(perRequest > 1 ? { minBatch: perRequest } : {}),
    evaluate: async (c) => {
      const t0 = Date.now()
      const score = await measureCandidate(run, load, c, ++trialNo)
      if (score !== undefined && score !== infeasible) slowest = Math.max(slowest, Date.now() - t0)
      return score
    },
    outOfTime: () => Date.now() + slowest > run.deadline,
    onTrial: (t, best) => {
      const m = Math.round((Date.now() - run.began) / 1000)
      run.say(
        `trial ${trialNo} (${Math.floor(m / 60)}m${String(m % 60).padStart(2, '0')}s of ${opts.budget}m): ` +
          `${describe(t.candidate)}: ${show(t.score)}${t === best ? '  ← best so far' : ''}`,
      )
    },
  })
  if (trials.length === 0)
    throw new BundleError('E_CLI_USAGE', `--budget ${opts.budget} minutes ran out before one candidate was measured`)
  report(run, trials)
}

interface RunnerView {
  name: string
  config: {
    kind: string
    workers?: number
    /** 'auto': onnxruntime's own default (a GPU runner). */
    intraOpThreads?: number | 'auto'
    isolation?: 'process' | 'thread'
    batchesPerWorker?: number
    batching?: { maxBatchSize?: number; maxDelayMs?: number }
    warmup?: { shapes?: Record<string, number[]> }
  }
}

/** The service as it is: the runner, its settings now (the search starts there), its warm-up shapes. */
async function settingsNow(run: Run): Promise<{ now: Candidate; shapes: string[] | undefined }> {
  const { opts } = run
  const first = await start(run.entry, undefined, Math.min(run.deadline, Date.now() + 120_000))
  if (typeof first === 'string') throw new BundleError('E_SERVE_CONFIG_INVALID', first)
  try {
    const res = await fetch(`${first.url}/runners`, {
      headers: run.key ? { authorization: `Bearer ${run.key}` } : {},
    })
    if (!res.ok)
      throw new BundleError(
        'E_SERVER_REQUEST_FAILED',
        res.status === 401
          ? 'the service requires an API key: pass --api-key (or set BUNDLE_API_KEY)'
          : `GET /runners answered ${res.status}`,
      )
    const runners = (await res.json()) as RunnerView[]
    const r = runners.find((x) => x.name === opts.runner)
    if (r === undefined)
      throw new BundleError(
        'E_CLI_USAGE',
        `--runner ${opts.runner}: the service has no such runner ` +
          `(it has ${runners.map((x) => x.name).join(', ') || 'none'})`,
      )
    if (r.config.kind !== 'onnx' && opts.api === undefined)
      throw new BundleError(
        'E_CLI_USAGE',
        `--runner ${opts.runner} is a ${r.config.kind} runner: tune it through its API with --api`,
      )
    const now: Candidate = {
      workers: r.config.workers ?? 1,
      intraOpThreads: typeof r.config.intraOpThreads === 'number' ? r.config.intraOpThreads : 0,
      maxBatchSize: r.config.batching?.maxBatchSize ?? 32,
      maxDelayMs: r.config.batching?.maxDelayMs ?? 10,
      isolation: r.config.isolation ?? 'process',
      batchesPerWorker: r.config.batchesPerWorker ?? 2,
    }
    const warm = r.config.warmup?.shapes
    const shapes =
      opts.shape ??
      (opts.api === undefined && warm
        ? Object.entries(warm).map(([name, dims]) => `${name}=${[1, ...dims].join(',')}`)
        : undefined)
    return { now, shapes }
  } finally {
    await first.stop()
  }
}

/** Serves the service with candidate `c` and measures it; undefined once the budget is spent. */
async function measureCandidate(run: Run, load: Load, c: Candidate, trialNo: number): Promise<Score | undefined> {
  const file = join(run.dir, `candidate-${trialNo}.yaml`)
  writeFileSync(file, stringify({ runners: { [run.opts.runner]: runnerConfig(c) } }))
  const served = await start(run.entry, file, run.deadline)
  if (typeof served === 'string') {
    if (Date.now() > run.deadline) return undefined
    run.say(`  ${describe(c)}: ${served}`)
    return infeasible
  }
  try {
    let target: Awaited<ReturnType<typeof prepareTarget>>
    try {
      target = await prepareTarget({ url: served.url, ...load }, Math.max(...run.steps))
    } catch (err) {
      // This candidate cannot serve the load (it refused the first request): it is measured as such.
      run.say(`  ${describe(c)}: ${(err as Error).message}`)
      return infeasible
    }
    try {
      return await sweep(run, target)
    } finally {
      target.close()
    }
  } finally {
    await served.stop()
  }
}

/** The loads of --concurrency, in order, until the bound is passed or goodput is flat twice running. */
async function sweep(run: Run, target: Awaited<ReturnType<typeof prepareTarget>>): Promise<Score | undefined> {
  const { p99, minThroughput } = run
  let best: Score | undefined
  let bestSeen: Score = infeasible
  let flat = 0
  for (const c of run.steps) {
    if (Date.now() > run.deadline) return undefined
    const r = await measureStep(
      () => target.send(),
      { mode: 'concurrency', value: c },
      { clock: realClock, warmupMs: Math.min(500, run.windowMs), windowMs: run.windowMs, maxWindows: run.maxWindows },
    )
    const s = r.stats
    const ok = (p99 === undefined || s.p99 <= p99) && (minThroughput === undefined || s.goodput >= minThroughput)
    const score = { feasible: ok, goodput: s.goodput, p99: s.p99, concurrency: c }
    if (s.goodput > bestSeen.goodput) bestSeen = score
    if (ok && (best === undefined || s.goodput > best.goodput)) best = score
    // Past the bound, more clients only wait longer; a flat goodput twice running is the plateau.
    if (p99 !== undefined && s.p99 > p99) break
    flat = s.goodput < (bestSeen.goodput ?? 0) * 1.05 && score !== bestSeen ? flat + 1 : 0
    if (flat >= 2) break
  }
  return best ?? { ...bestSeen, feasible: false }
}

const show = (s: Score) =>
  `${s.goodput.toFixed(1)}/s, p99 ${Number.isFinite(s.p99) ? s.p99.toFixed(1) : '-'} ms at ` +
  `c=${s.concurrency}${s.feasible ? '' : ' (misses the bound)'}`

const HEAD = [
  'workers',
  'threads',
  'batch',
  'window ms',
  'isolation',
  'per worker',
  'goodput/s',
  'p99 ms',
  'at c',
  'meets',
]

const rows = (ts: readonly Trial[]) =>
  ts.map((t) => [
    String(t.candidate.workers),
    String(t.candidate.intraOpThreads || 'auto'),
    String(t.candidate.maxBatchSize),
    String(t.candidate.maxDelayMs),
    t.candidate.isolation,
    String(t.candidate.batchesPerWorker),
    t.score.goodput.toFixed(1),
    Number.isFinite(t.score.p99) ? t.score.p99.toFixed(1) : '-',
    String(t.score.concurrency),
    t.score.feasible ? 'yes' : 'no',
  ])

/** Every trial, the top three, best against now; the best written as a serve config (exit 1 if none met the bound). */
function report(run: Run, trials: Trial[]): void {
  const { opts, p99, minThroughput, entry } = run
  const order = ranked(trials)
  const best = order[0]!
  const start0 = trials[0]!
  write(`Tried (${trials.length}, in order; the first is the service's settings now):\n`)
  write(table(HEAD, rows(trials)))
  write('\nTop three:\n')
  write(table(HEAD, rows(order.slice(0, 3))))
  write(`\nBest: ${describe(best.candidate)}: ${show(best.score)}\n`)
  write(`Now:  ${describe(start0.candidate)}: ${show(start0.score)}\n`)
  const bounds = `${p99 ? ` --p99 ${p99}` : ''}${minThroughput ? ` --min-throughput ${minThroughput}` : ''}`
  if (!best.score.feasible) {
    process.stderr.write(
      `error: no setting met${bounds}; nothing written. Loosen the bound, add cores or replicas, or give a longer ` +
        '--budget\n',
    )
    process.exitCode = 1
    return
  }
  if (opts.output === undefined) return
  const header =
    `# bundle tune ${entry} --runner ${opts.runner}${bounds}, ${new Date().toISOString().slice(0, 10)}\n` +
    `# best: ${show(best.score)}; the settings before: ${show(start0.score)}\n`
  writeFileSync(opts.output, header + stringify({ runners: { [opts.runner]: runnerConfig(best.candidate) } }))
  run.say(`wrote ${opts.output}: bundle serve ${entry} --config ${opts.output}`)
}
