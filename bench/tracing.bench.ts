// npm run bench:tracing — what tracing costs the served path. The same server with tracing off
// (no endpoint: the default), against the code from before tracing existed (BENCH_BASELINE, a
// git revision built in a worktree), against tracing on with every request sampled (spans of
// the API process and the runner worker exported over OTLP/HTTP to a receiver in this process),
// and on with nothing sampled. wrk loads each server from a process of its own; pairs run
// interleaved, each cell the median round. Greeter: the HTTP path alone (no runner), where a
// per-request cost shows most; quickstart /classifyTensor: through a runner and its worker.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { OtlpReceiver } from '../test/utils/otlp-receiver.js'
import { interleaved } from './pair.js'
import { fmt, machine, writeSection } from './results.js'
import { type Server, startServer, waitReady } from './server.js'
import { hasWrk, wrk } from './wrk.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
/** The last commit before tracing (issue 19's traces): the "before" side of the off-cost row. */
const BASELINE = process.env.BENCH_BASELINE ?? '71d8777'

if (!(await hasWrk())) {
  console.error('bench:tracing needs wrk (apt-get install wrk)')
  process.exit(1)
}

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-tracing-'))
const home = join(dir, 'home')
const greetFile = join(dir, 'greet.json')
writeFileSync(greetFile, JSON.stringify({ name: 'ada' }))
const tensorFile = join(dir, 'tensor.bin')
writeFileSync(tensorFile, new Uint8Array(new Float32Array(3 * 48 * 192).fill(0.25).buffer))
const GREET = { bodyFile: greetFile, headers: { 'content-type': 'application/json' } }
const TENSOR = {
  bodyFile: tensorFile,
  headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,192' },
}
type Load = typeof GREET

/** The baseline's checkout, built (tsc) beside this one, sharing its node_modules. */
function baselineTree(): string {
  const tree = join(dir, 'baseline')
  execFileSync('git', ['worktree', 'add', '--detach', tree, BASELINE], { cwd: ROOT, stdio: 'ignore' })
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'))
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: tree,
    stdio: 'inherit',
  })
  return tree
}

const serveFrom = async (tree: string, entry: string, env: Record<string, string> = {}): Promise<Server> => {
  const s = await startServer([join(tree, 'bin/bundle'), 'serve', join(tree, entry), '--port', '0'], {
    BUNDLE_HOME: home,
    ...env,
  })
  await waitReady(s.url)
  return s
}

const run = (url: string, load: Load, connections: number, seconds = SECONDS) =>
  wrk({ url, ...load, connections, seconds, threads: connections >= 16 ? 2 : 1 })

/** A against B under `load` (see interleaved): each side's median round and the median ratio. */
const pair = (a: string, b: string, load: Load, connections: number) =>
  interleaved((url, seconds) => run(url, load, connections, seconds), a, b, ROUNDS)

const rows: string[] = []
// Counts and drops what it gets: a collector elsewhere costs the served machine nothing to decode.
const rx = await OtlpReceiver.start({ decode: false })
const tree = baselineTree()
/** Servers A and B, started for one pair and stopped after it (idle ones would share the cores). */
async function compare(entry: string, route: string, load: Load, connections: number, a: Start, b: Start) {
  const [sa, sb] = [await a(entry), await b(entry)]
  try {
    return await pair(sa.url + route, sb.url + route, load, connections)
  } finally {
    for (const s of [sa, sb]) s.child.kill('SIGTERM')
  }
}
type Start = (entry: string) => Promise<Server>
const off: Start = (entry) => serveFrom(ROOT, entry)
const before: Start = (entry) => serveFrom(tree, entry)
const traced: Start = (entry) => serveFrom(ROOT, entry, { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url })
const unsampled: Start = (entry) =>
  serveFrom(ROOT, entry, { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url, OTEL_TRACES_SAMPLER: 'always_off' })
const row = (label: string, r: Awaited<ReturnType<typeof pair>>, extra = '') =>
  `| ${label} | ${fmt(r.a.goodput, 0)}/s | ${fmt(r.b.goodput, 0)}/s | ${fmt(r.ratio, 3)}× | p50 ` +
  `${fmt(r.a.p50Ms, 2)} vs ${fmt(r.b.p50Ms, 2)} ms${extra} |`
try {
  for (const [entry, route, load, connections] of [
    ['examples/greeter/service.ts', '/greet', GREET, 16],
    ['examples/quickstart/service.ts', '/classifyTensor', TENSOR, 32],
  ] as const) {
    const label = `${entry.split('/')[1]} \`${route}\`, ${connections} connections`
    rows.push(
      row(
        `${label}: tracing off vs before tracing existed`,
        await compare(entry, route, load, connections, off, before),
      ),
    )
    const sent = { requests: rx.requests.protobuf, bytes: rx.bytes }
    const on = await compare(entry, route, load, connections, traced, off)
    const kb = (rx.bytes - sent.bytes) / 1024
    rows.push(
      row(
        `${label}: every request traced vs off`,
        on,
        `; ${rx.requests.protobuf - sent.requests} exports, ${fmt(kb / 1024, 1)} MiB`,
      ),
    )
    rows.push(
      row(
        `${label}: tracing on, none sampled (always_off) vs off`,
        await compare(entry, route, load, connections, unsampled, off),
      ),
    )
    console.log(rows.slice(-3).join('\n'))
  }
} finally {
  await rx.close()
  execFileSync('git', ['worktree', 'remove', '--force', tree], { cwd: ROOT, stdio: 'ignore' })
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true })
}

writeSection(
  'tracing',
  `## Tracing cost (\`npm run bench:tracing\`)

${machine()}. wrk (keep-alive, closed loop) in a process of its own; goodput counts 2xx answers. ${SECONDS} s windows
after a 2 s warm-up, ${ROUNDS} rounds per pair run interleaved; each cell is the median round, each ratio the median of
per-round ratios. "Before tracing existed" is commit ${BASELINE} built in a worktree. Traced servers export over
OTLP/HTTP (protobuf, the SDK's default batching) to a receiver in the bench's process that counts what it gets and
drops it (decoding there would take the served machine's cores from the server; a collector runs elsewhere). Each
pair's two servers run alone.

| measure | A | B | A / B | latency |
|---|---|---|---|---|
${rows.join('\n')}
`,
)
