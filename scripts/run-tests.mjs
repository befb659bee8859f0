// node:test's run(), given the files in the order scripts/test.mjs chose: `node --test FILES`
// sorts them by name, and the order is what lets long files overlap short ones. Each file runs in
// a child process with this process's flags (--import tsx, --import ./scripts/test-slot.mjs).
// TAP on stdout, as `node --test` writes it when piped (CI reads its closing `# pass` / `# fail`).
import { run } from 'node:test'
import { tap } from 'node:test/reporters'
import { resolve } from 'node:path'

const concurrency = Number(process.env.BUNDLE_TEST_CONCURRENCY ?? 2)
const stream = run({ files: process.argv.slice(2).map((f) => resolve(f)), concurrency, timeout: 300_000 })
stream.on('test:fail', () => {
  process.exitCode = 1
})
stream.compose(tap).pipe(process.stdout)
