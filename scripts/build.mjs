// npm run build (and npm ci, through "prepare"): TypeScript into dist/, then the tracing SDK
// bundle (bundle-sdk.mjs). The compiler says nothing while it works, which on a small machine is
// a minute or more: say what is happening and how long it took.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

const started = performance.now()
process.stderr.write('modelbundle: compiling TypeScript into dist/ (a minute or so on a small machine)…\n')
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
if (r.status !== 0) process.exit(r.status ?? 1)
await import('./bundle-sdk.mjs')
process.stderr.write(`modelbundle: built dist/ in ${((performance.now() - started) / 1000).toFixed(0)} s\n`)
