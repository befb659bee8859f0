import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import type { Candidate, Score, Trial } from '../framework/client/bench/search.js'
import { table, write } from './output.js'
import { start } from './tune-server.js'

interface TuneFlags {
  runner: string
  p99?: string
  minThroughput?: string
  budget: string
  api?: string
  input?: string
  contentType?: string
  shape?: string[]
  concurrency: string
  window: string
  maxWindows: string
  output?: string
  apiKey?: string
}

function positive(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined
  const n = Number(v)
  if (!(n > 0) || !Number.isFinite(n)) throw new BundleError('E_CLI_USAGE', `${flag} "${v}" must be a positive number`)
  return n
}

/** The serve config file's entry for one runner with these settings (0 threads: left to the runner). */
export function runnerConfig(c: Candidate): Record<string, unknown> {
  return {
    workers: c.workers,
    ...(c.intraOpThreads > 0 ? { intraOpThreads: c.intraOpThreads } : {}),
    isolation: c.isolation,
    batchesPerWorker: c.batchesPerWorker,
    batching: { maxBatchSize: c.maxBatchSize, maxDelayMs: c.maxDelayMs },
  }
}

const describe = (c: Candidate) =>
  `workers=${c.workers} threads=${c.intraOpThreads || 'auto'} batch=${c.maxBatchSize} window=${c.maxDelayMs}ms ` +
  `${c.isolation} batches/worker=${c.batchesPerWorker}`

/**
 * `bundle tune ENTRY --runner NAME`: model_analyzer built in. Serves the service with candidate
 * settings of one runner, measures each over a concurrency sweep, searches (search.ts) under
 * the p99 bound and minimum throughput, and writes the best as a serve config file.
 */
export function tuneCommand(): Command {
  return new Command('tune')
    .description(
      "find a runner's best workers, threads, batch size, batch window, isolation and batches per worker under a " +
        'latency bound, by ' +
        'serving and measuring candidates; writes a --config file for bundle serve',
    )
    .argument('<entry>', 'what bundle serve takes: a project directory, path/to/service.ts, or a bundle')
    .requiredOption('--runner <name>', 'the runner to tune')
    .option('--p99 <ms>', 'latency bound: a setting counts only at loads it answers within this p99')
    .option('--min-throughput <n>', 'and only if it serves at least this many requests a second')
    .option('--budget <minutes>', 'never run longer than this (default 10)', '10')
    .option('--api <route>', 'load a service API (with --input or --shape) instead of the model over /v2')
    .option('--input <path>', 'request body for --api: a file or a directory of files')
    .option('--content-type <type>', 'media type of --input files (default: from their extension)')
    .option(
      '--shape <dims>',
      "tensor shape of a request (default: one row of the runner's warm-up shapes); NAME=DIMS per input",
      (v: string, all: string[] = []) => [...all, v],
    )
    .option('--concurrency <range>', 'the loads each candidate is measured at', '1:64:x2')
    .option('--window <ms>', 'measurement window of each load step', '1000')
    .option('--max-windows <n>', 'a step ends after this many windows, settled or not', '4')
    .option('-o, --output <file>', 'write the best settings here as a serve config file (YAML)')
    .option('--api-key <key>', 'the server key, if the service sets one (default $BUNDLE_API_KEY)')
    .action(async (entry: string, opts: TuneFlags) => {
      const p99 = positive('--p99', opts.p99)
      const minThroughput = positive('--min-throughput', opts.minThroughput)
      const budgetMs = positive('--budget', opts.budget)! * 60_000
      const windowMs = positive('--window', opts.window)!
      const maxWindows = Math.max(3, Math.round(positive('--max-windows', opts.maxWindows)!))
      const began = Date.now()
      const deadline = began + budgetMs
      const { parseRange } = await import('../framework/client/bench/range.js')
      const steps = parseRange('--concurrency', opts.concurrency, { integer: true })
      const { search, ranked } = await import('../framework/client/bench/search.js')
      const { measureStep } = await import('../framework/client/bench/drive.js')
      const { prepareTarget } = await import('../framework/client/bench/index.js')
      const { realClock } = await import('../runners/index.js')
      const { stringify } = await import('yaml')
      const say = (line: string) => process.stderr.write(`${line}\n`)
      const key = opts.apiKey ?? process.env.BUNDLE_API_KEY
      // The load's flags are checked before any server starts.
      if (opts.input !== undefined && opts.api === undefined)
        throw new BundleError(
          'E_CLI_USAGE',
          '--input goes with --api (a service API); the model gets tensors of --shape',
        )
      if (opts.api !== undefined && opts.input === undefined && opts.shape === undefined)
        throw new BundleError('E_CLI_USAGE', '--api needs its request body: --input FILE|DIR, or --shape DIMS')
      if (opts.input !== undefined) {
        const { filePayloads } = await import('../framework/client/bench/inputs.js')
        filePayloads(opts.input, opts.contentType)
      }
      const dir = mkdtempSync(join(tmpdir(), 'bundle-tune-'))
      try {
        await tune(dir)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
      async function tune(dir: string): Promise<void> {
        // The service as it is: which runner, its settings now (the search starts there), its warm-up shapes.
        const first = await start(entry, undefined, Math.min(deadline, Date.now() + 120_000))
        if (typeof first === 'string') throw new BundleError('E_SERVE_CONFIG_INVALID', first)
        let now: Candidate
        let shapes = opts.shape
        try {
          const res = await fetch(`${first.url}/runners`, { headers: key ? { authorization: `Bearer ${key}` } : {} })
          if (!res.ok)
            throw new BundleError(
              'E_SERVER_REQUEST_FAILED',
              res.status === 401
                ? 'the service requires an API key: pass --api-key (or set BUNDLE_API_KEY)'
                : `GET /runners answered ${res.status}`,
            )
          const runners = (await res.json()) as {
            name: string
            config: {
              kind: string
              workers?: number
              intraOpThreads?: number
              isolation?: 'process' | 'thread'
              batchesPerWorker?: number
              batching?: { maxBatchSize?: number; maxDelayMs?: number }
              warmup?: { shapes?: Record<string, number[]> }
            }
          }[]
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
          now = {
            workers: r.config.workers ?? 1,
            intraOpThreads: r.config.intraOpThreads ?? 0,
            maxBatchSize: r.config.batching?.maxBatchSize ?? 32,
            maxDelayMs: r.config.batching?.maxDelayMs ?? 10,
            isolation: r.config.isolation ?? 'process',
            batchesPerWorker: r.config.batchesPerWorker ?? 2,
          }
          if (shapes === undefined && opts.api === undefined && r.config.warmup?.shapes)
            shapes = Object.entries(r.config.warmup.shapes).map(([name, dims]) => `${name}=${[1, ...dims].join(',')}`)
        } finally {
          await first.stop()
        }
        const load = {
          ...(opts.api !== undefined ? { api: opts.api } : { model: opts.runner }),
          ...(opts.input !== undefined ? { input: opts.input } : {}),
          ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
          ...(shapes ? { shapes } : {}),
          ...(key ? { key } : {}),
        }

        let trialNo = 0
        let slowest = 0
        const evaluate = async (c: Candidate): Promise<Score | undefined> => {
          const t0 = Date.now()
          trialNo++
          const file = join(dir, `candidate-${trialNo}.yaml`)
          writeFileSync(file, stringify({ runners: { [opts.runner]: runnerConfig(c) } }))
          const served = await start(entry, file, deadline)
          if (typeof served === 'string') {
            if (Date.now() > deadline) return undefined
            say(`  ${describe(c)}: ${served}`)
            return { feasible: false, goodput: 0, p99: Infinity, concurrency: 0 }
          }
          try {
            let target: Awaited<ReturnType<typeof prepareTarget>>
            try {
              target = await prepareTarget({ url: served.url, ...load }, Math.max(...steps))
            } catch (err) {
              // This candidate cannot serve the load (it refused the first request): it is measured as such.
              say(`  ${describe(c)}: ${(err as Error).message}`)
              return { feasible: false, goodput: 0, p99: Infinity, concurrency: 0 }
            }
            let best: Score | undefined
            let bestSeen: Score = { feasible: false, goodput: 0, p99: Infinity, concurrency: 0 }
            let flat = 0
            try {
              for (const c2 of steps) {
                if (Date.now() > deadline) return undefined
                const r = await measureStep(
                  () => target.send(),
                  { mode: 'concurrency', value: c2 },
                  {
                    clock: realClock,
                    warmupMs: Math.min(500, windowMs),
                    windowMs,
                    maxWindows,
                  },
                )
                const s = r.stats
                const ok =
                  (p99 === undefined || s.p99 <= p99) && (minThroughput === undefined || s.goodput >= minThroughput)
                const score = { feasible: ok, goodput: s.goodput, p99: s.p99, concurrency: c2 }
                if (s.goodput > bestSeen.goodput) bestSeen = score
                if (ok && (best === undefined || s.goodput > best.goodput)) best = score
                // Past the bound, more clients only wait longer; a flat goodput twice running is the plateau.
                if (p99 !== undefined && s.p99 > p99) break
                flat = s.goodput < (bestSeen.goodput ?? 0) * 1.05 && score !== bestSeen ? flat + 1 : 0
                if (flat >= 2) break
              }
            } finally {
              target.close()
            }
            const score = best ?? { ...bestSeen, feasible: false }
            slowest = Math.max(slowest, Date.now() - t0)
            return score
          } finally {
            await served.stop()
          }
        }
        const show = (s: Score) =>
          `${s.goodput.toFixed(1)}/s, p99 ${Number.isFinite(s.p99) ? s.p99.toFixed(1) : '-'} ms at ` +
          `c=${s.concurrency}${s.feasible ? '' : ' (misses the bound)'}`
        // Rows per request: a batch smaller than that would refuse every request.
        const perRequest =
          opts.api === undefined && shapes?.length ? Number(shapes[0]!.split('=').pop()!.split(',')[0]) : 1
        const trials = await search({
          start: now,
          cores: cpus().length,
          ...(perRequest > 1 ? { minBatch: perRequest } : {}),
          evaluate,
          outOfTime: () => Date.now() + slowest > deadline,
          onTrial: (t, best) => {
            const m = Math.round((Date.now() - began) / 1000)
            say(
              `trial ${trialNo} (${Math.floor(m / 60)}m${String(m % 60).padStart(2, '0')}s of ${opts.budget}m): ` +
                `${describe(t.candidate)}: ${show(t.score)}${t === best ? '  ← best so far' : ''}`,
            )
          },
        })
        if (trials.length === 0)
          throw new BundleError(
            'E_CLI_USAGE',
            `--budget ${opts.budget} minutes ran out before one candidate was measured`,
          )
        const order = ranked(trials)
        const best = order[0]!
        const start0 = trials[0]!
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
        const head = [
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
        write(`Tried (${trials.length}, in order; the first is the service's settings now):\n`)
        write(table(head, rows(trials)))
        write('\nTop three:\n')
        write(table(head, rows(order.slice(0, 3))))
        write(
          `\nBest: ${describe(best.candidate)}: ${show(best.score)}\n` +
            `Now:  ${describe(start0.candidate)}: ${show(start0.score)}\n`,
        )
        if (!best.score.feasible) {
          process.stderr.write(
            `error: no setting met${p99 ? ` --p99 ${p99}` : ''}` +
              `${minThroughput ? ` --min-throughput ${minThroughput}` : ''}; ` +
              'nothing written. Loosen the bound, add cores or replicas, or give a longer --budget\n',
          )
          process.exitCode = 1
          return
        }
        if (opts.output !== undefined) {
          const header =
            `# bundle tune ${entry} --runner ${opts.runner}${p99 ? ` --p99 ${p99}` : ''}` +
            `${minThroughput ? ` --min-throughput ${minThroughput}` : ''}, ${new Date().toISOString().slice(0, 10)}\n` +
            `# best: ${show(best.score)}; the settings before: ${show(start0.score)}\n`
          writeFileSync(opts.output, header + stringify({ runners: { [opts.runner]: runnerConfig(best.candidate) } }))
          say(`wrote ${opts.output}: bundle serve ${entry} --config ${opts.output}`)
        }
      }
    })
}
