// npm run bench:bundle — bundle build time, and `bundle serve TAG` cold start (process start
// to /readyz 200, warm-up included) for the quickstart, against serving its TypeScript source.
// Target from the bundles issue: bundle cold start ≤ 1.5 s.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { fmt, machine, median, writeSection } from './results.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart', import.meta.url))
const home = mkdtempSync(join(tmpdir(), 'mb-bench-bundle-'))
const env = { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }

/** ms from spawn to the first /readyz 200. */
async function coldStart(target: string, port: number): Promise<number> {
  const t0 = performance.now()
  const child = spawn(process.execPath, [BIN, 'serve', target, '--port', String(port)], {
    env,
    stdio: 'ignore',
    cwd: tmpdir(),
  })
  const exited = new Promise((r) => child.on('exit', r))
  try {
    for (;;) {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined)
      if (r?.status === 200) return performance.now() - t0
      if (performance.now() - t0 > 60_000) throw new Error(`${target} never became ready`)
      await new Promise((res) => setTimeout(res, 5))
    }
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

try {
  const builds: number[] = []
  for (let i = 0; i < 3; i++) {
    const t = performance.now()
    const r = spawnSync(process.execPath, [BIN, 'build', QUICKSTART, '--version', `1.0.${i}`], {
      env,
      encoding: 'utf8',
    })
    if (r.status !== 0) throw new Error(r.stderr)
    builds.push(performance.now() - t)
  }
  const bundle: number[] = []
  const source: number[] = []
  for (let i = 0; i < 5; i++) {
    bundle.push(await coldStart('quickstart:1.0.0', 23000 + i))
    source.push(await coldStart(join(QUICKSTART, 'service.ts'), 23100 + i))
  }
  const b = median(bundle)
  writeSection(
    'bundle',
    `## Bundles (\`npm run bench:bundle\`)\n\n${machine()}. Quickstart; medians of 3 builds and 5 interleaved cold ` +
      `starts (process spawn to the first \`/readyz\` 200, runner warm-up included).\n\n| what | median | all runs ` +
      `(ms) |\n|---|---|---|\n` +
      `| \`bundle build examples/quickstart\` (CLI process included) | ${fmt(median(builds), 0)} ms | ` +
      `${builds.map((x) => fmt(x, 0)).join(', ')} |\n` +
      `| \`bundle serve quickstart:1.0.0\` cold start (compiled bundle) | ${fmt(b, 0)} ms | ` +
      `${bundle.map((x) => fmt(x, 0)).join(', ')} |\n` +
      `| \`bundle serve examples/quickstart/service.ts\` cold start (TypeScript via tsx) | ` +
      `${fmt(median(source), 0)} ms | ${source.map((x) => fmt(x, 0)).join(', ')} |\n\n` +
      `Target: bundle cold start ≤ 1500 ms — ${b <= 1500 ? 'met' : 'missed'} (${fmt(b, 0)} ms).`,
  )
  console.log({ build: median(builds), bundle: b, source: median(source) })
} finally {
  rmSync(home, { recursive: true, force: true })
}
