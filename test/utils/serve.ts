import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BIN } from './cli.js'
import { listeningUrl } from './port.js'
import { until } from './remote.js'

// A real `bundle serve` for tests that need the server as users run it.

/**
 * A process, with a temp dir of its own if `dir` is given; stop() signals it (SIGKILL unless told), waits for it to
 * exit, then removes the dir.
 */
export function owned(child: ChildProcess, dir: string | undefined): (signal?: NodeJS.Signals) => Promise<void> {
  const exited = new Promise<void>((r) =>
    child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()),
  )
  return async (signal = 'SIGKILL') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    await exited
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }
}

export interface Served {
  url: string
  port: number
  /** The server process (its /proc/PID/fd shows its open connections). */
  pid: number
  /** The last 4 KiB the server wrote (stdout and stderr). */
  output(): string
  /** `grpc://host:port` when it serves gRPC too (GRPC_PORT / --grpc-port). */
  grpcUrl?: string
  stop(signal?: NodeJS.Signals): Promise<void>
}

/**
 * `bundle serve ENTRY [ARGS]` on a port the OS picks (--port 0, read back from its log); resolves once /readyz answers
 * 200. It gets a BUNDLE_HOME of its own (removed by stop()) unless `env` names one. `nodeArgs`: flags for node
 * itself (e.g. --inspect), the server process's only (its workers are forked with their own).
 */
export async function serveReady(
  entry: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
  nodeArgs: readonly string[] = [],
): Promise<Served> {
  const own = env.BUNDLE_HOME === undefined ? mkdtempSync(join(tmpdir(), 'mb-serve-')) : undefined
  const child = spawn(process.execPath, [...nodeArgs, BIN, 'serve', entry, '--port', '0', ...args], {
    env: { ...process.env, BUNDLE_ACCESS_LOG: '0', ...(own ? { BUNDLE_HOME: own } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  // What the server said, for the error if it never gets ready (the last 4 KiB is enough).
  let said = ''
  let grpcUrl: string | undefined
  const keep = (c: string) => {
    said = (said + c).slice(-4096)
    grpcUrl ??= /"url":"(grpc:\/\/[^"]+)"/.exec(said)?.[1]
  }
  child.stderr!.on('data', (c: Buffer) => keep(c.toString()))
  const stop = owned(child, own)
  let url: string
  try {
    url = await listeningUrl(child, keep)
    await untilReady(url)
  } catch (e) {
    await stop()
    throw new Error(`${(e as Error).message}; the server said: ${said}`)
  }
  // The gRPC line follows the HTTP one; it is there once the server is ready.
  return {
    url,
    port: Number(new URL(url).port),
    pid: child.pid!,
    output: () => said,
    ...(grpcUrl ? { grpcUrl } : {}),
    stop,
  }
}

/** Resolves once `${url}/readyz` answers 200; fails after `ms`. */
export function untilReady(url: string, ms = 60_000): Promise<void> {
  return until(
    `${url}/readyz to answer 200`,
    async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200,
    ms,
  )
}
