import { spawn, type ChildProcess } from 'node:child_process'
import { createConnection } from 'node:net'
import { after, before } from 'node:test'
import { BIN } from './cli.js'
import { freePort, listeningUrl } from './port.js'
import { until } from './until.js'

// Processes for remote-runner tests: `bundle serve --runners remote`, `bundle worker`, and a
// private redis-server that a test may stop and start again.

export interface Proc {
  child: ChildProcess
  output: () => string
  /** SIGTERM (or the given signal); resolves on exit. */
  stop(signal?: NodeJS.Signals): Promise<void>
}

function proc(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, BUNDLE_ACCESS_LOG: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += c))
  child.stderr!.on('data', (c) => (out += c))
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  return {
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      await exited
    },
  }
}

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, p: Proc, ms = 60_000): Promise<void> {
  const until = Date.now() + ms
  while (!(await ok())) {
    if (p.child.exitCode !== null) throw new Error(`${what}: the process exited: ${p.output()}`)
    if (Date.now() > until) throw new Error(`${what} timed out: ${p.output()}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export { freePort } from './port.js'

/** `bundle serve ENTRY --runners remote`; resolves once it listens (ready or not). */
export async function remoteServe(
  entry: string,
  redis: string,
  env: Record<string, string>,
  extra: string[] = [],
): Promise<Proc & { url: string }> {
  const p = proc(['serve', entry, '--port', '0', '--runners', 'remote', '--redis', redis, ...extra], env)
  const url = await listeningUrl(p.child).catch(async (e: unknown) => (await p.stop('SIGKILL'), Promise.reject(e)))
  return { ...p, url }
}

/** `bundle serve --models PATTERNS --runners remote`; resolves once it listens (ready or not). */
export async function remoteModelServe(
  patterns: string,
  redis: string,
  env: Record<string, string>,
): Promise<Proc & { url: string }> {
  const p = proc(['serve', '--models', patterns, '--port', '0', '--runners', 'remote', '--redis', redis], env)
  const url = await listeningUrl(p.child).catch(async (e: unknown) => (await p.stop('SIGKILL'), Promise.reject(e)))
  return { ...p, url }
}

/** `bundle worker --models PATTERNS`, started and not waited for. */
export function startModelWorker(
  patterns: string,
  redis: string,
  env: Record<string, string>,
  extra: string[] = [],
): Proc {
  return proc(['worker', '--models', patterns, '--redis', redis, ...extra], env)
}

/** `bundle worker ENTRY`, started and not waited for. */
export function startWorker(entry: string, redis: string, env: Record<string, string>, extra: string[] = []): Proc {
  return proc(['worker', entry, '--redis', redis, ...extra], env)
}

/** Resolves once a worker says it is ready. */
export const workerReady = (p: Proc): Promise<void> =>
  waitFor('worker ready', () => p.output().includes('"worker ready"'), p)

/** `bundle worker ENTRY`; resolves once it says it is ready. */
export async function worker(
  entry: string,
  redis: string,
  env: Record<string, string>,
  extra: string[] = [],
): Promise<Proc> {
  const p = startWorker(entry, redis, env, extra)
  await workerReady(p)
  return p
}

export { until }

/** A redis-server of a test's own, which it may stop and start again. */
export interface PrivateRedis {
  url: string
  start(): Promise<void>
  stop(): Promise<void>
}

/** A redis-server of its own on a free port, which the test may stop and start again. */
export async function privateRedis(): Promise<PrivateRedis> {
  const port = await freePort()
  let child: ChildProcess | undefined
  const reachable = () =>
    new Promise<boolean>((resolve) => {
      const s = createConnection({ port, host: '127.0.0.1' }, () => {
        s.end()
        resolve(true)
      })
      s.on('error', () => resolve(false))
    })
  const r = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' },
      )
      await until('redis-server', reachable, 10_000)
    },
    async stop() {
      if (child === undefined) return
      const c = child
      child = undefined
      const gone = new Promise((res) => c.once('exit', res))
      c.kill('SIGKILL')
      await gone
    },
  }
  await r.start()
  return r
}

/** What a JSON POST got back, and how long it took. */
export interface Answer {
  status: number
  body: any
  ms: number
}

/** POSTs `body` as JSON; the answer with its Retry-After header. */
export async function post(url: string, body: unknown): Promise<Answer & { retryAfter: string | null }> {
  const t = performance.now()
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: r.status, body: await r.json(), ms: performance.now() - t, retryAfter: r.headers.get('retry-after') }
}

/** The remote-service fixture's /double call. */
export const double = (url: string, x: number) => post(`${url}/double`, { x })

/**
 * A private redis-server for one describe block (handed to `ready` before its tests) and the
 * processes its tests start: `track` them, and they are SIGKILLed, then Redis stopped, after.
 */
export function usePrivateRedis(ready: (redis: PrivateRedis) => void): <T extends Proc>(p: T) => T {
  let redis: PrivateRedis | undefined
  const procs: Proc[] = []
  before(async () => {
    redis = await privateRedis()
    ready(redis)
  })
  after(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await redis?.stop()
  })
  return (p) => (procs.push(p), p)
}
