import { readFileSync } from 'node:fs'
import { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import type { IndexRow } from '../framework/index.js'
import { humanSize, shortDate, structured, table, write } from './output.js'

interface Target {
  url: string
  apiKey?: string
}

/** Calls a running server's repository extension; its `{ error }` answers become one coded line. */
async function call(t: Target, path: string, body?: unknown): Promise<unknown> {
  const base = t.url.replace(/\/+$/, '')
  let r: Response
  try {
    r = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10 * 60_000),
    })
  } catch (err) {
    throw new BundleError(
      'E_SERVER_UNREACHABLE',
      `cannot reach ${base}: ` +
        `${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`,
    )
  }
  const text = await r.text()
  let json: unknown
  try {
    json = text ? JSON.parse(text) : {}
  } catch {
    json = { error: text.slice(0, 200) }
  }
  if (!r.ok)
    throw new BundleError(
      'E_SERVER_REQUEST_FAILED',
      `${base} answered ${r.status}: ${(json as { error?: unknown }).error ?? text.slice(0, 200)}`,
    )
  return json
}

/** The server on this machine that `bundle serve` starts by default ($PORT, else 3000). */
const localServer = (): string => `http://127.0.0.1:${process.env.PORT || 3000}`

const target = (opts: { url?: string; apiKey?: string }): Target => ({
  url: opts.url ?? localServer(),
  ...((opts.apiKey ?? process.env.BUNDLE_API_KEY) ? { apiKey: opts.apiKey ?? process.env.BUNDLE_API_KEY } : {}),
})

/** The repository index as a table; a server under a memory budget adds each model's size and last use. */
function loadedTable(rows: readonly IndexRow[]): string {
  const state = (r: IndexRow) => r.state + (r.pinned ? ' (pinned)' : '') + (r.reason ? ` (${r.reason})` : '')
  const remote = rows.some((r) => r.held_by !== undefined)
  if (!remote && !rows.some((r) => r.size_bytes !== undefined))
    return table(
      ['Name', 'Version', 'State'],
      rows.map((r) => [r.name, r.version, state(r)]),
    )
  // Remote runners: which workers hold each model now (`bundle worker --models`).
  const held = (r: IndexRow) => (remote ? [r.held_by?.join(', ') || '-'] : [])
  return table(
    ['Name', 'Version', 'State', 'Size', 'Last used', ...(remote ? ['Held by'] : [])],
    rows.map((r) => [
      r.name,
      r.version,
      state(r),
      r.size_bytes === undefined ? '' : humanSize(r.size_bytes),
      r.last_used ? shortDate(r.last_used) : '',
      ...held(r),
    ]),
  )
}

/** `bundle models load|unload|loaded --url`: model control on a running server. */
export function remoteModelCommands(): Command[] {
  const load = new Command('load')
    .description(
      'load a stored model into a running server (a newer version of a serving model replaces it without failing ' +
        'requests)',
    )
    .argument('<name>', 'model name (name:version also works)')
    .option('--url <url>', 'the server (default http://127.0.0.1:$PORT, else :3000)')
    .option('--version <version>', 'version to load (default: the newest stored)')
    .option('--config <json|@file>', 'runner options as JSON, or @path to a JSON file (workers, batching, warmup, …)')
    .option('--keep', 'load next to the versions already loaded instead of replacing them', false)
    .option('--api-key <key>', 'API key of the server (default $BUNDLE_API_KEY)')
    .action(
      async (
        nameArg: string,
        opts: { url?: string; version?: string; config?: string; keep: boolean; apiKey?: string },
      ) => {
        const [name, fromTag] = nameArg.split(':') as [string, string | undefined]
        let config: unknown
        if (opts.config !== undefined) {
          const text = opts.config.startsWith('@') ? readFileSync(opts.config.slice(1), 'utf8') : opts.config
          try {
            config = JSON.parse(text)
          } catch {
            throw new BundleError('E_CLI_USAGE', `--config is not JSON: ${opts.config.slice(0, 60)}`)
          }
        }
        const version = opts.version ?? fromTag
        const r = (await call(target(opts), `/v2/repository/models/${encodeURIComponent(name)}/load`, {
          parameters: {
            ...(version ? { version } : {}),
            ...(config ? { config } : {}),
            ...(opts.keep ? { keep: true } : {}),
          },
        })) as { name: string; version: string }
        write(`loaded ${r.name}:${r.version}\n`)
      },
    )

  const unload = new Command('unload')
    .description('unload a model from a running server (its queued requests are answered first)')
    .argument('<name>')
    .option('--url <url>', 'the server (default http://127.0.0.1:$PORT, else :3000)')
    .option('--version <version>', 'only this version')
    .option('--api-key <key>', 'API key of the server (default $BUNDLE_API_KEY)')
    .action(async (name: string, opts: { url?: string; version?: string; apiKey?: string }) => {
      await call(
        target(opts),
        `/v2/repository/models/${encodeURIComponent(name)}/unload`,
        opts.version ? { parameters: { version: opts.version } } : undefined,
      )
      write(`unloaded ${name}${opts.version ? `:${opts.version}` : ''}\n`)
    })

  const loaded = new Command('loaded')
    .description("a running server's model repository: every stored onnx model and its state there")
    .option('--url <url>', 'the server (default http://127.0.0.1:$PORT, else :3000)')
    .option('-o, --output <format>', 'table, json or yaml', 'table')
    .option('--api-key <key>', 'API key of the server (default $BUNDLE_API_KEY)')
    .action(async (opts: { url?: string; output: string; apiKey?: string }) => {
      const rows = (await call(target(opts), '/v2/repository/index')) as IndexRow[]
      if (opts.output === 'table') write(loadedTable(rows))
      else write(await structured(rows, opts.output === 'yaml' ? 'yaml' : 'json'))
    })
  return [load, unload, loaded]
}
