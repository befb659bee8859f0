// npm run bench:remote — remote runners over Redis (BullMQ):
//  1. scale-out: a runner whose batch takes a fixed 200 ms whatever its size (a simulated
//     accelerator), served by 1, 2 and 4 `bundle worker` processes; target ≥ 3.5× from 1 to 4;
//  2. the Redis hop: the same runner with no delay at concurrency 1, local vs remote (p50/p99);
//  3. the quickstart model (real onnxruntime) over one remote worker vs local, c=1 and c=8.
// A redis-server of its own on a free port; every process on this machine (loopback).
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runLoad, type LoadResult } from './load.js'
import { fmt, machine, writeSection } from './results.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const SERVICE = fileURLToPath(new URL('../test/fixtures/remote-service.ts', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart/service.ts', import.meta.url))
const home = mkdtempSync(join(tmpdir(), 'mb-bench-remote-'))
const redisPort = 30000 + Math.floor(Math.random() * 20000)
const redis = `redis://127.0.0.1:${redisPort}`
const children: ChildProcess[] = []

function start(args: string[], env: Record<string, string> = {}): { child: ChildProcess; out: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += c))
  child.stderr!.on('data', (c) => (out += c))
  children.push(child)
  return { child, out: () => out }
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 90_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const gone = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await gone
}

async function serve(entry: string, port: number, remote: boolean, env: Record<string, string>): Promise<ChildProcess> {
  const p = start(
    ['serve', entry, '--port', String(port), ...(remote ? ['--runners', 'remote', '--redis', redis] : [])],
    env,
  )
  // A remote API server is ready once a worker is live; before that it says it waits for one.
  await until(`serve ${entry}`, async () => {
    const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined)
    if (r === undefined) return false
    const body = (await r.json().catch(() => ({}))) as { reason?: string }
    return r.status === 200 || (remote && /no live remote worker/.test(body.reason ?? ''))
  })
  return p.child
}

const ready = (port: number) =>
  until(
    `ready on ${port}`,
    async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
  )

async function workers(entry: string, n: number, env: Record<string, string>): Promise<ChildProcess[]> {
  const ws = Array.from({ length: n }, () => start(['worker', entry, '--redis', redis], env))
  await until('workers ready', () => ws.every((w) => w.out().includes('"worker ready"')))
  return ws.map((w) => w.child)
}

const load = (
  url: string,
  body: string | Uint8Array,
  concurrency: number,
  type = 'application/json',
  durationMs = 8_000,
): Promise<LoadResult> =>
  runLoad({ url, headers: { 'content-type': type }, body, concurrency, warmupMs: 2_000, durationMs })

const redisServer = spawn(
  'redis-server',
  ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  { stdio: 'ignore' },
)
try {
  await new Promise((r) => setTimeout(r, 300))
  const sections: string[] = []

  // 1. Scale-out with a simulated accelerator.
  const delay = { ACCEL_DELAY_MS: '200', ACCEL_LATENCY_MS: '10000' }
  const scale: { n: number; r: LoadResult }[] = []
  const api = await serve(SERVICE, 24100, true, delay)
  let ws: ChildProcess[] = []
  for (const n of [1, 2, 4]) {
    ws.push(...(await workers(SERVICE, n - ws.length, delay)))
    await until(`${n} workers seen`, async () =>
      new RegExp(`bundle_runner_remote_workers\\{[^}]*\\} ${n}\\b`).test(
        await (await fetch('http://127.0.0.1:24100/metrics')).text(),
      ),
    )
    scale.push({ n, r: await load('http://127.0.0.1:24100/double', '{"x":1}', 64) })
  }
  await Promise.all([stop(api), ...ws.map(stop)])
  const base = scale[0]!.r.okRps
  const x4 = scale[2]!.r.okRps / base
  sections.push(
    `### Scale-out: a 200 ms batch (simulated accelerator, maxBatchSize 16), c=64\n\n| remote workers | ok req/s | ` +
      `× one worker | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|\n` +
      scale
        .map(
          ({ n, r }) =>
            `| ${n} | ${fmt(r.okRps)} | ${fmt(r.okRps / base, 2)} | ${fmt(r.okP50, 0)} | ${fmt(r.okP99, 0)} | ` +
            `${r.errors} |`,
        )
        .join('\n') +
      `\n\nTarget ≥ 3.5× from 1 to 4 workers — ${x4 >= 3.5 ? 'met' : 'missed'} (${fmt(x4, 2)}×). The ceiling is 16 ` +
      `rows per 200 ms per worker: ${16 * 5} req/s each.`,
  )

  // 2. The Redis hop: no delay, one request at a time.
  const none = { ACCEL_DELAY_MS: '0' }
  const local = await serve(SERVICE, 24200, false, none)
  const l = await load('http://127.0.0.1:24200/double', '{"x":1}', 1)
  await stop(local)
  const rapi = await serve(SERVICE, 24201, true, none)
  ws = await workers(SERVICE, 1, none)
  await ready(24201)
  const rr = await load('http://127.0.0.1:24201/double', '{"x":1}', 1)
  await Promise.all([stop(rapi), ...ws.map(stop)])
  sections.push(
    `### The Redis hop: a batch of one with no work, c=1\n\n| runner | req/s | p50 ms | p99 ms |\n` +
      `|---|---|---|---|\n| local (child process) | ${fmt(l.okRps)} | ${fmt(l.okP50, 2)} | ${fmt(l.okP99, 2)} |\n| ` +
      `remote (BullMQ over Redis, one worker) | ${fmt(rr.okRps)} | ${fmt(rr.okP50, 2)} | ${fmt(rr.okP99, 2)} |\n\n` +
      `Added by the hop: p50 ${fmt(rr.okP50 - l.okP50, 2)} ms, p99 ${fmt(rr.okP99 - l.okP99, 2)} ms. Target p50 ≤ ` +
      `2 ms — ${rr.okP50 - l.okP50 <= 2 ? 'met' : 'missed'}.`,
  )

  // 3. The quickstart model, local vs one remote worker.
  const png = new Uint8Array(
    await (await import('node:fs/promises')).readFile(new URL('../test/fixtures/images/hello-0.png', import.meta.url)),
  )
  const rows: string[] = []
  // The quickstart's 50 ms latency bound leaves no room for a network hop; both sides get 200 ms.
  const bound = { BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_LATENCY_MS: '200' }
  const q = await serve(QUICKSTART, 24300, false, bound)
  const ql = [
    await load('http://127.0.0.1:24300/classify', png, 1, 'image/png'),
    await load('http://127.0.0.1:24300/classify', png, 8, 'image/png'),
  ]
  await stop(q)
  ws = await workers(QUICKSTART, 1, bound)
  const qr = await serve(QUICKSTART, 24301, true, bound)
  await ready(24301)
  const qrr = [
    await load('http://127.0.0.1:24301/classify', png, 1, 'image/png'),
    await load('http://127.0.0.1:24301/classify', png, 8, 'image/png'),
  ]
  await Promise.all([stop(qr), ...ws.map(stop)])
  for (const [i, c] of [1, 8].entries()) {
    rows.push(
      `| local | ${c} | ${fmt(ql[i]!.okRps)} | ${fmt(ql[i]!.okP50, 1)} | ${fmt(ql[i]!.okP99, 1)} | ${ql[i]!.errors} |`,
    )
    rows.push(
      `| one remote worker | ${c} | ${fmt(qrr[i]!.okRps)} | ${fmt(qrr[i]!.okP50, 1)} | ${fmt(qrr[i]!.okP99, 1)} | ` +
        `${qrr[i]!.errors} |`,
    )
  }
  sections.push(
    `### Quickstart (real model) over one remote worker\n\n| runner | c | ok req/s | p50 ms | p99 ms | errors |\n` +
      `|---|---|---|---|---|---|\n${rows.join('\n')}\n\nPNG in, \`/classify\` (decode and resize in the API ` +
      `server, 3 × 48 × 192 float32 = 110 KiB per row to the model), maxLatencyMs 200 on both sides.`,
  )

  writeSection(
    'remote',
    `## Remote runners (\`npm run bench:remote\`)\n\n${machine()}. API server, workers and redis-server on this ` +
      `machine, over loopback; closed loop, 8 s after 2 s of warm-up.\n\n${sections.join('\n\n')}`,
  )
  console.log({
    scale: scale.map(({ n, r }) => [n, r.okRps]),
    hop: { local: l.okP50, remote: rr.okP50 },
    quickstart: { local: ql.map((r) => r.okRps), remote: qrr.map((r) => r.okRps) },
  })
} finally {
  await Promise.all(children.map(stop))
  redisServer.kill('SIGKILL')
  rmSync(home, { recursive: true, force: true })
}
