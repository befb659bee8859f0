import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

// Real headless Chromium for browser tests, and a reader for the JSON net log it writes
// (--log-net-log): Chromium's own record of every request it started and every socket it opened.

/** The first Chromium binary on PATH (Debian: chromium), or undefined. */
export function findChromium(): string | undefined {
  const candidates = [process.env.CHROMIUM_BIN, 'chromium', 'chromium-browser', 'google-chrome'].filter(
    (c): c is string => !!c,
  )
  return candidates.find((c) => spawnSync(c, ['--version'], { stdio: 'ignore', timeout: 30_000 }).status === 0)
}

/**
 * Flags for a quiet, sandbox-free headless run (as root in CI). `--disable-background-networking`
 * and friends cut Chromium's own chatter, not all of it: the net log still tells its requests
 * apart from the page's (see {@link readNetLog}).
 */
export const HEADLESS_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-extensions',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-dev-shm-usage',
]

/** Runs Chromium to completion; kills its whole process group if it outlives `ms`. */
export function runChromium(
  bin: string,
  args: readonly string[],
  ms = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // Its own process group, so a timeout takes the zygote and renderers down with it.
    const child = spawn(bin, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c) => (stdout += c))
    child.stderr.on('data', (c) => (stderr += c))
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        /* already gone */
      }
      reject(new Error(`chromium ran past ${ms} ms and was killed; stderr:\n${stderr.slice(-4000)}`))
    }, ms)
    child.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

export interface NetRequest {
  url: string
  /** The origin that asked for it; 'not an origin' for navigations typed in and for Chromium's own services. */
  initiator: string
  /** 'main frame', 'sub frame' or 'other'. */
  type: string
  /** The status line of the response, if one came back. */
  status?: string
  /** A net error code (e.g. -105 ERR_NAME_NOT_RESOLVED), if it failed. */
  netError?: number
}

export interface NetLog {
  requests: NetRequest[]
  /** Remote address of every TCP connection attempt ("127.0.0.1:3000", "[::1]:80"). */
  tcpConnects: string[]
  /** Remote address of every UDP socket that sent bytes (connected sockets that send nothing are only route probes). */
  udpSends: string[]
}

interface RawEvent {
  type: number
  phase?: number
  source: { id: number }
  params?: Record<string, unknown>
}

/** Parses a `--log-net-log` file into the requests Chromium started and the sockets it used. */
export function readNetLog(file: string): NetLog {
  const log = JSON.parse(readFileSync(file, 'utf8')) as {
    constants: { logEventTypes: Record<string, number> }
    events: RawEvent[]
  }
  const name = new Map(Object.entries(log.constants.logEventTypes).map(([k, v]) => [v, k]))
  // Per URL_REQUEST source: one entry per job (a redirect starts a second job on the same request).
  const bySource = new Map<number, NetRequest[]>()
  const udpPeer = new Map<number, string>()
  const tcpConnects: string[] = []
  const udpSends: string[] = []
  for (const e of log.events) {
    const p = e.params ?? {}
    const jobs = bySource.get(e.source.id)
    switch (name.get(e.type)) {
      case 'URL_REQUEST_START_JOB':
        if (typeof p.url === 'string')
          bySource.set(e.source.id, [
            ...(jobs ?? []),
            { url: p.url, initiator: String(p.initiator), type: String(p.request_type) },
          ])
        else if (typeof p.net_error === 'number' && jobs) jobs.at(-1)!.netError = p.net_error
        break
      case 'HTTP_TRANSACTION_READ_RESPONSE_HEADERS': {
        const headers = p.headers as string[] | undefined
        if (jobs && headers?.[0]) jobs.at(-1)!.status = headers[0]
        break
      }
      case 'TCP_CONNECT_ATTEMPT':
        if (typeof p.address === 'string') tcpConnects.push(p.address)
        break
      case 'UDP_CONNECT':
        if (typeof p.address === 'string') udpPeer.set(e.source.id, p.address)
        break
      case 'UDP_BYTES_SENT':
        udpSends.push(typeof p.address === 'string' ? p.address : (udpPeer.get(e.source.id) ?? 'unknown'))
        break
    }
  }
  return { requests: [...bySource.values()].flat(), tcpConnects, udpSends }
}

/** True for a socket address on the loopback interface. */
export const isLoopback = (address: string): boolean => /^(127\.\d+\.\d+\.\d+|\[::1\]):\d+$/.test(address)
