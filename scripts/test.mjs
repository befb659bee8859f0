// Runs every test/**/*.test.ts through node:test with tsx (Node 20's --test has no globs).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return e.name === 'fixtures' ? [] : find(p)
    return e.name.endsWith('.test.ts') ? [p] : []
  })
}

/**
 * The order files start in: those that run alone first (one after the other, nothing waits
 * beside them), then the long ones (`// test-slot: long`, a minute or more), so that they overlap
 * the many short files instead of running on by themselves at the end; then the rest.
 */
function ordered(files) {
  const rank = (f) => {
    const head = readFileSync(f, 'utf8').slice(0, 2000)
    if (/^\/\/ test-slot: exclusive/m.test(head)) return 0
    return /^\/\/ test-slot: long/m.test(head) ? 1 : 2
  }
  const ranks = new Map(files.map((f) => [f, rank(f)]))
  return [...files].sort((a, b) => ranks.get(a) - ranks.get(b) || a.localeCompare(b))
}

/**
 * dist/, if every source file it compiles has a .js there at least as new as itself (npm test
 * builds first): runner workers then start from dist/ instead of through tsx (compiledTwin in
 * runners/pool/backend.ts). A source file edited since the last build keeps them on tsx.
 */
function currentDist() {
  const { include } = JSON.parse(readFileSync('tsconfig.build.json', 'utf8'))
  const sources = include.flatMap((dir) => walk(dir)).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
  const current = sources.every((f) => {
    const js = join('dist', `${f.slice(0, -3)}.js`)
    return existsSync(js) && statSync(js).mtimeMs >= statSync(f).mtimeMs
  })
  return current ? resolve('dist') : undefined
}

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
  )
}

const only = process.argv.slice(2)
const files = only.length ? only : ordered(find('test'))
if (files.length === 0) {
  console.error('no test files found under test/')
  process.exit(1)
}
// Two files at a time (BUNDLE_TEST_CONCURRENCY to change it); scripts/test-slot.mjs runs the files
// that measure speed alone. scripts/run-tests.mjs keeps the order above (`node --test` sorts).
const slots = mkdtempSync(join(tmpdir(), 'mb-test-slots-'))
const dist = currentDist()
if (dist === undefined)
  console.error('dist/ is older than the sources (npm run build): runner workers start through tsx')
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--import', './scripts/test-slot.mjs', 'scripts/run-tests.mjs', ...files],
  {
    stdio: 'inherit',
    env: { ...process.env, BUNDLE_TEST_SLOTS: slots, ...(dist ? { BUNDLE_WORKERS_FROM: dist } : {}) },
  },
)
rmSync(slots, { recursive: true, force: true })
process.exit(r.status ?? 1)
