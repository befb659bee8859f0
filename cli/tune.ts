import { Command } from 'commander'
import type { TuneFlags } from './tune-flags.js'

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
      // The measuring code loads only when tune runs (the CLI starts fast for every other command).
      const { runTune } = await import('./tune-run.js')
      await runTune(entry, opts)
    })
}
