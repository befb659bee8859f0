import { writeFileSync } from 'node:fs'
import { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import { write } from './output.js'

interface BenchFlags {
  api?: string
  model?: string
  modelVersion?: string
  input?: string
  contentType?: string
  shape?: string[]
  concurrency?: string
  rate?: string
  arrivals: string
  warmup: string
  window: string
  maxWindows: string
  apiKey?: string
  output: string
  plot?: string
}

function ms(flag: string, v: string, min: number): number {
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < min)
    throw new BundleError('E_CLI_USAGE', `${flag} "${v}" must be a whole number ≥ ${min}`)
  return n
}

/**
 * `bundle bench URL`: perf_analyzer built in. Progress goes to stderr (one line redrawn on a
 * terminal, a line per window otherwise); the table, CSV or JSON to stdout.
 */
export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'measure a running server: a sweep of concurrency or request rates, each step until stable, with goodput, ' +
        'latency percentiles and the server-side queue, compute and batch size',
    )
    .argument(
      '<url>',
      'http://HOST:PORT (a service API with --api, or a model over /v2 with --model) or grpc://HOST:PORT',
    )
    .option('--api <route>', 'a service API to POST to, e.g. /classify')
    .option(
      '--model <name>',
      'a model to infer on (Open Inference Protocol: /v2 binary over http, ModelInfer over grpc)',
    )
    .option('--model-version <version>', 'that version of the model (default: the one served by default)')
    .option('--input <path>', 'request body for --api: a file, or a directory of files sent in turn')
    .option('--content-type <type>', 'media type of --input files (default: from their extension)')
    .option(
      '--shape <dims>',
      'random tensor shape, e.g. 1,3,48,192 (NAME=DIMS per input for models with several; repeatable)',
      (v: string, all: string[] = []) => [...all, v],
    )
    .option('--concurrency <range>', 'closed loop: clients, N or START:END[:STEP|:xFACTOR] (default 1:32:x2)')
    .option('--rate <range>', 'open loop: requests per second, N or START:END[:STEP|:xFACTOR]')
    .option('--arrivals <kind>', 'open loop: constant or poisson', 'constant')
    .option('--warmup <ms>', 'each step warms up for this long, not counted', '2000')
    .option('--window <ms>', 'measurement window', '2000')
    .option('--max-windows <n>', 'a step that has not settled after this many windows ends, marked unstable', '10')
    .option('--api-key <key>', 'sent as Authorization: Bearer (default $BUNDLE_API_KEY)')
    .option('-o, --output <format>', 'table, csv or json', 'table')
    .option('--plot <file.html>', 'also write goodput against p99 latency as an HTML page')
    .action(async (url: string, opts: BenchFlags) => {
      if (!['table', 'csv', 'json'].includes(opts.output))
        throw new BundleError('E_CLI_USAGE', `--output must be table, csv or json, not "${opts.output}"`)
      if (opts.arrivals !== 'constant' && opts.arrivals !== 'poisson')
        throw new BundleError('E_CLI_USAGE', `--arrivals must be constant or poisson, not "${opts.arrivals}"`)
      if (opts.arrivals === 'poisson' && opts.rate === undefined)
        throw new BundleError('E_CLI_USAGE', '--arrivals applies to the open loop: add --rate')
      if (opts.plot !== undefined && !/\.html?$/i.test(opts.plot))
        throw new BundleError('E_CLI_USAGE', `--plot "${opts.plot}" must name an .html file`)
      const { runBench, table, csv, json, plotHtml } = await import('../framework/client/bench/index.js')
      const tty = process.stderr.isTTY
      const key = opts.apiKey ?? process.env.BUNDLE_API_KEY
      const rows = await runBench(
        {
          url,
          ...(opts.api !== undefined ? { api: opts.api } : {}),
          ...(opts.model !== undefined ? { model: opts.model } : {}),
          ...(opts.modelVersion !== undefined ? { version: opts.modelVersion } : {}),
          ...(opts.input !== undefined ? { input: opts.input } : {}),
          ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
          ...(opts.shape ? { shapes: opts.shape } : {}),
          ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
          ...(opts.rate !== undefined ? { rate: opts.rate } : {}),
          arrivals: opts.arrivals,
          warmupMs: ms('--warmup', opts.warmup, 0),
          windowMs: ms('--window', opts.window, 100),
          maxWindows: ms('--max-windows', opts.maxWindows, 3),
          ...(key ? { key } : {}),
        },
        (line) => process.stderr.write(tty ? `\r${line}\x1b[K` : `${line}\n`),
      )
      if (tty) process.stderr.write('\r\x1b[K')
      write(opts.output === 'csv' ? csv(rows) : opts.output === 'json' ? json(rows) : table(rows))
      if (opts.plot !== undefined) {
        writeFileSync(opts.plot, plotHtml(rows, `bundle bench ${url} ${opts.api ?? opts.model ?? ''}`))
        process.stderr.write(`plot written to ${opts.plot}\n`)
      }
    })
}
