import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { tempDir, writeFile } from '../utils/tmp.js'

// `bundle serve` loads a service written in TypeScript into a process already running the
// compiled framework. The service's own `import … from 'modelbundle'` must reach that same copy:
// a second copy of every module costs start-up and splits module-level state in two. Run as
// `bundle` runs, from dist/ in a plain node (no tsx loaded beforehand).

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
const LOADER = JSON.stringify(join(REPO, 'dist/runners/pool/import-module.js'))

describe('importTypeScript (a service or a runner module, by path)', () => {
  /** An ES module project whose node_modules holds this checkout as modelbundle, and zod (as an install's would). */
  function project(files: Record<string, string>): string {
    const dir = tempDir()
    mkdirSync(join(dir, 'node_modules'))
    symlinkSync(REPO, join(dir, 'node_modules', 'modelbundle'))
    symlinkSync(join(REPO, 'node_modules', 'zod'), join(dir, 'node_modules', 'zod'))
    writeFile(dir, 'package.json', '{ "type": "module" }\n')
    for (const [name, text] of Object.entries(files)) writeFile(dir, name, text)
    return dir
  }

  const load = async (dir: string, file: string) => {
    const script =
      `const fw = await import(${JSON.stringify(join(REPO, 'dist/framework/index.js'))});` +
      `const { importTypeScript } = await import(${LOADER});` +
      `const mod = await importTypeScript(${JSON.stringify(join(dir, file))});` +
      'console.log(JSON.stringify({ same: mod.fw.defineService === fw.defineService, value: mod.value }))'
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir })
    return JSON.parse(stdout) as { same: boolean; value: unknown }
  }

  it("a TypeScript file's import of 'modelbundle' is the copy already running, and its own .ts imports load", {
    timeout: 60_000,
  }, async () => {
    const dir = project({
      'service.ts': [
        "import * as fw from 'modelbundle'",
        "import { double } from './helper.js'",
        'export { fw }',
        'export const value: number = double(21)',
      ].join('\n'),
      'helper.ts': 'export const double = (x: number): number => x * 2\n',
    })
    assert.deepEqual(await load(dir, 'service.ts'), { same: true, value: 42 })
  })

  it('a second TypeScript file in the same process loads too (tsx is registered once); zod is shared as well', {
    timeout: 60_000,
  }, async () => {
    const dir = project({
      'a.ts': "export const value: string = 'a'\n",
      'b.ts': "import { z } from 'zod'\nexport const zod = z\nexport const value: string = 'b'\n",
    })
    const script =
      `const { z } = await import(${JSON.stringify(join(REPO, 'node_modules/zod/index.js'))});` +
      `const { importTypeScript } = await import(${LOADER});` +
      `const a = await importTypeScript(${JSON.stringify(join(dir, 'a.ts'))});` +
      `const b = await importTypeScript(${JSON.stringify(join(dir, 'b.ts'))});` +
      `const again = await importTypeScript(${JSON.stringify(join(dir, 'a.ts'))});` +
      'console.log(JSON.stringify([a.value, b.value, a === again, b.zod === z]))'
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir })
    assert.deepEqual(JSON.parse(stdout), ['a', 'b', true, true])
  })
})
