// Runs every test/**/*.test.ts through node:test with tsx (Node 20's --test has no globs).
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
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
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-timeout=300000', ...files], {
  stdio: 'inherit',
})
process.exit(r.status ?? 1)
