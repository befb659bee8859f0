// wrk as the load generator of the served-path benchmarks: a process of its own (C, epoll), so
// the server under test does not share its event loop or its garbage collector with the load.
// bench/wrk/post.lua counts answers by status: goodput is the 2xx answers alone.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const sh = promisify(execFile)
const SCRIPT = fileURLToPath(new URL('./wrk/post.lua', import.meta.url))

export interface WrkOptions {
  url: string
  /** The request body, from this file. */
  bodyFile: string
  headers: Record<string, string>
  connections: number
  seconds: number
  threads?: number
}

export interface WrkResult {
  seconds: number
  /** 2xx answers per second. */
  goodput: number
  /** Answers by status. */
  statuses: Record<string, number>
  /** Non-2xx answers (refusals and errors) and socket errors. */
  refused: number
  socketErrors: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
}

export function hasWrk(): Promise<boolean> {
  return sh('wrk', ['--version']).then(
    () => true,
    (e: { stdout?: string }) => /^wrk /.test(e.stdout ?? ''), // wrk --version prints its usage and exits 1
  )
}

export async function wrk(o: WrkOptions): Promise<WrkResult> {
  const threads = Math.min(o.threads ?? 2, o.connections)
  const env = {
    ...process.env,
    BODY_FILE: o.bodyFile,
    HEADERS: Object.entries(o.headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('|'),
  }
  const { stdout } = await sh(
    'wrk',
    [`-t${threads}`, `-c${o.connections}`, `-d${o.seconds}s`, '--timeout', '30s', '-s', SCRIPT, o.url],
    { env, maxBuffer: 16 << 20 },
  )
  const line = stdout.trim().split('\n').at(-1)!
  const r = JSON.parse(line) as {
    durationUs: number
    statuses: Record<string, number>
    socketErrors: number
    p50Us: number
    p90Us: number
    p99Us: number
  }
  const seconds = r.durationUs / 1e6
  const ok = Object.entries(r.statuses).reduce((n, [s, c]) => n + (s.startsWith('2') ? c : 0), 0)
  const all = Object.values(r.statuses).reduce((a, b) => a + b, 0)
  return {
    seconds,
    goodput: ok / seconds,
    statuses: r.statuses,
    refused: all - ok,
    socketErrors: r.socketErrors,
    p50Ms: r.p50Us / 1000,
    p90Ms: r.p90Us / 1000,
    p99Ms: r.p99Us / 1000,
  }
}
