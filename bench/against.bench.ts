// npm run bench:against -- REF — the served path of this checkout against an earlier commit, on
// the same machine in the same run: REF is checked out into a git worktree (its own build, this
// checkout's node_modules), both serve the quickstart, and wrk loads them interleaved (pair.ts),
// so a claim of "no regression" is a ratio measured side by side, not two numbers from two days.
// Goodput counts 2xx answers only. Writes the "against" section of bench/RESULTS.md.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { interleaved } from './pair.js'
import { fmt, machine, median, writeSection } from './results.js'
import { startServer, waitReady, type Server } from './server.js'
import { hasWrk, wrk, type WrkResult } from './wrk.js'

const REPO = fileURLToPath(new URL('..', import.meta.url))
const PNG = fileURLToPath(new URL('../test/fixtures/images/hello-180.png', import.meta.url))
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10)

const ref = process.argv[2]
if (!ref) {
  console.error('usage: npm run bench:against -- REF   (a commit, tag or branch to compare this checkout with)')
  process.exit(2)
}
if (!(await hasWrk())) {
  console.error('bench:against needs wrk (apt-get install wrk)')
  process.exit(1)
}
const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim()
const base = git('rev-parse', '--short', `${ref}^{commit}`)
const head = git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain', '--untracked-files=no') ? '+' : '')

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-against-'))
const tree = join(dir, 'base')
git('worktree', 'add', '--detach', tree, base)
symlinkSync(join(REPO, 'node_modules'), join(tree, 'node_modules'))
console.error(`building ${base} in ${tree}…`)
execFileSync('npm', ['run', 'build'], { cwd: tree, stdio: 'inherit' })

const tensorFile = join(dir, 'tensor.bin')
writeFileSync(tensorFile, new Uint8Array(new Float32Array(3 * 48 * 192).fill(0.25).buffer))
const LOADS = [
  { name: '`/classifyTensor`', path: '/classifyTensor', connections: 32, bodyFile: tensorFile, tensor: true },
  { name: '`/classify` (PNG)', path: '/classify', connections: 32, bodyFile: PNG, tensor: false },
  { name: '`/classifyTensor`', path: '/classifyTensor', connections: 1, bodyFile: tensorFile, tensor: true },
]

/** `bundle serve examples/quickstart/service.ts` from one checkout, on a store of its own. */
async function serve(root: string, home: string): Promise<Server> {
  const s = await startServer(
    [join(root, 'bin/bundle'), 'serve', join(root, 'examples/quickstart/service.ts'), '--port', '0'],
    { BUNDLE_HOME: home },
  )
  await waitReady(s.url)
  return s
}

interface Row {
  load: (typeof LOADS)[number]
  head: WrkResult[]
  base: WrkResult[]
  ratios: number[]
}
const rows: Row[] = []
const servers: Server[] = []
try {
  const headServer = await serve(REPO, join(dir, 'home-head'))
  servers.push(headServer)
  const baseServer = await serve(tree, join(dir, 'home-base'))
  servers.push(baseServer)
  for (const load of LOADS) {
    const headers: Record<string, string> = load.tensor
      ? { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,192' }
      : { 'content-type': 'image/png' }
    const run = (url: string, seconds = SECONDS) =>
      wrk({
        url: url + load.path,
        bodyFile: load.bodyFile,
        headers,
        connections: load.connections,
        seconds,
        threads: load.connections >= 16 ? 2 : 1,
      })
    const r = await interleaved(run, headServer.url, baseServer.url, ROUNDS, (i, ratio) =>
      console.error(`${load.name} c=${load.connections} round ${i}: head/base ${fmt(ratio, 3)}`),
    )
    rows.push({ load, head: r.as, base: r.bs, ratios: r.ratios })
  }
} finally {
  // The servers go before their worktree does.
  await Promise.all(
    servers.map((s) => {
      const gone = s.child.exitCode === null ? new Promise((r) => s.child.once('exit', r)) : undefined
      s.child.kill('SIGTERM')
      return gone
    }),
  )
  git('worktree', 'remove', '--force', tree)
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true })
}

const med = (xs: WrkResult[], f: (x: WrkResult) => number, digits: number) => fmt(median(xs.map(f)), digits)
const table = [
  `| route | connections | goodput ${head} req/s | goodput ${base} req/s | ratio (median of rounds) | ` +
    'ratios, lowest – highest | p50 ms head / base | p99 ms head / base |',
  '|---|---|---|---|---|---|---|---|',
  ...rows.map((r) => {
    const both = (f: (x: WrkResult) => number, digits: number) =>
      `${med(r.head, f, digits)} / ${med(r.base, f, digits)}`
    const cells = [
      r.load.name,
      r.load.connections,
      med(r.head, (x) => x.goodput, 0),
      med(r.base, (x) => x.goodput, 0),
      fmt(median(r.ratios), 3),
      `${fmt(Math.min(...r.ratios), 2)} – ${fmt(Math.max(...r.ratios), 2)}`,
      both((x) => x.p50Ms, 2),
      both((x) => x.p99Ms, 1),
    ]
    return `| ${cells.join(' | ')} |`
  }),
].join('\n')
const md = `## This checkout against an earlier commit (\`npm run bench:against -- ${ref}\`)

${machine()}.
\`bundle serve examples/quickstart/service.ts\` from ${head} (this checkout) and from ${base} (a git
worktree), both running at once on stores of their own; wrk in a process of its own, ${ROUNDS} rounds of
${SECONDS} s per route, the two servers alternating which goes first. Goodput counts 2xx answers only.

${table}
`
writeSection('against', md)
console.log(md)
