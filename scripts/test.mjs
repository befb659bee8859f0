// Runs every test/**/*.test.ts through node:test with tsx (Node 20's --test has no globs).
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return e.name === 'fixtures' ? [] : find(p)
    return e.name.endsWith('.test.ts') ? [p] : []
  })
}

const only = process.argv.slice(2)
const files = only.length ? only : find('test').sort()
if (files.length === 0) {
  console.error('no test files found under test/')
  process.exit(1)
}
// Two files at a time (BUNDLE_TEST_CONCURRENCY to change it); scripts/test-slot.mjs runs the files
// that measure speed alone.
const concurrency = process.env.BUNDLE_TEST_CONCURRENCY ?? '2'
const slots = mkdtempSync(join(tmpdir(), 'mb-test-slots-'))
const r = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--import',
    './scripts/test-slot.mjs',
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-timeout=300000',
    ...files,
  ],
  { stdio: 'inherit', env: { ...process.env, BUNDLE_TEST_SLOTS: slots } },
)
rmSync(slots, { recursive: true, force: true })
process.exit(r.status ?? 1)
