import { cpSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { after } from 'node:test'
import { fileURLToPath } from 'node:url'

/**
 * A fresh temp directory, removed when the current test or suite ends — call it in a test or
 * a describe body, not in a before() hook (it would be removed when the hook ends).
 */
export function tempDir(prefix = 'mb-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/**
 * A copy of examples/quickstart to edit, removed when the current test ends. It lies inside the
 * repository, so the copy resolves the same npm packages as the example.
 */
export function quickstartCopy(): string {
  const src = mkdtempSync(join(fileURLToPath(new URL('../..', import.meta.url)), '.test-tmp-'))
  after(() => rmSync(src, { recursive: true, force: true }))
  cpSync(fileURLToPath(new URL('../../examples/quickstart', import.meta.url)), src, { recursive: true })
  return src
}

export function writeFile(dir: string, name: string, content: string | Buffer): string {
  const p = join(dir, name)
  writeFileSync(p, content)
  return p
}

/** Every file under `root` (relative path → size), optionally skipping top-level folders. */
export function snapshot(root: string, skip: readonly string[] = []): Record<string, number> {
  const out: Record<string, number> = {}
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name)
      const rel = relative(root, full)
      if (skip.includes(rel.split('/')[0]!)) continue
      const st = statSync(full)
      if (st.isDirectory()) walk(full)
      else out[rel] = st.size
    }
  }
  walk(root)
  return out
}
