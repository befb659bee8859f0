import { type CatalogEntry, entry } from './entry.js'

/** The command line and errors of no particular part. */
export const CLI = {
  // command line
  E_CLI_USAGE: entry(
    400,
    2,
    'The command line could not be parsed (unknown flag, missing argument).',
    'Run the command with --help and correct the flags.',
  ),
  E_CLI_CONFIRM_REQUIRED: entry(
    400,
    2,
    'A destructive command needs confirmation and no terminal is attached.',
    'Pass -y/--yes to confirm non-interactively.',
  ),
  E_INTERNAL: entry(
    500,
    1,
    'An unexpected internal error.',
    'Retry; if it persists, report it with the log line (set BUNDLE_DEBUG=1 for the stack).',
  ),
} as const satisfies Record<string, CatalogEntry>
