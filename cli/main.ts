import { readFileSync } from 'node:fs'
import { Command } from 'commander'
import { reportError } from './errors.js'
import { benchCommand } from './bench.js'
import { bundleCommands } from './bundles.js'
import { tuneCommand } from './tune.js'
import { modelsCommand } from './models.js'
import { serveCommand } from './serve.js'
import { workerCommand } from './worker.js'
import { keysCommand, signCommand, verifyCommand } from './signing.js'

function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
      .version
  } catch {
    return '0.0.0'
  }
}

/** commander's parse errors in our one-line shape (its "Did you mean …?" hint joins the line). */
const usageLine = (str: string, write: (s: string) => void): void =>
  write(
    `error E_CLI_USAGE: ${str
      .replace(/^error: /, '')
      .trim()
      .replace(/\s*\n\s*/g, ' ')}\n`,
  )

export function program(): Command {
  const root = new Command('bundle')
    .description('modelbundle: store, serve and package ML models from TypeScript')
    .version(version(), '-V, --version')
    .showSuggestionAfterError(true)
    // root options only before the subcommand: `models save --version 1.0.0` is the model's version
    .enablePositionalOptions()
    .configureOutput({
      // commander's own parse errors get our one-line shape and code
      outputError: usageLine,
    })
  root.addCommand(modelsCommand())
  root.addCommand(serveCommand())
  root.addCommand(workerCommand())
  root.addCommand(benchCommand())
  root.addCommand(tuneCommand())
  root.addCommand(keysCommand())
  root.addCommand(signCommand())
  root.addCommand(verifyCommand())
  for (const c of bundleCommands()) root.addCommand(c)
  // Every subcommand: throw instead of exiting, so reportError decides the exit code.
  const override = (cmd: Command): void => {
    cmd.exitOverride()
    cmd.configureOutput({ outputError: usageLine })
    cmd.commands.forEach(override)
  }
  override(root)
  return root
}

export async function main(argv: string[] = process.argv): Promise<void> {
  // `bundle models list | head` closes the pipe early: that is success, not a crash.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    // Nowhere left to print: end quietly (0 for a closed pipe, 1 for anything else).
    process.exit(err.code === 'EPIPE' ? (process.exitCode ?? 0) : 1)
  })
  // No command at all (`bundle`, `bundle --`): one usage line, as for every other usage error,
  // instead of commander's whole help on stderr.
  if (argv.slice(2).every((a) => a === '--')) {
    usageLine('error: no command given; run `bundle --help` to see the commands', (s) => process.stderr.write(s))
    process.exitCode = 2
    return
  }
  try {
    await program().parseAsync(argv)
  } catch (err) {
    process.exitCode = reportError(err)
  }
}
