import { copyFileSync, existsSync, linkSync, mkdirSync, renameSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { BundleError } from '../errors/index.js'
import { ioError, removeQuietly, tempName } from './fs-util.js'
import type { ModelStore } from './model-store.js'
import type { ModelFile } from './types.js'

/** Where the files of the model or bundle with this digest are checked out. */
export function checkoutDir(store: ModelStore, digest: string): string {
  return join(store.layout.checkouts, digest.replace(/^sha256:/, ''))
}

/**
 * A directory keyed by `digest` holding `files` under their own paths, hard-linked
 * to the blobs; made once (atomically, by rename) and reused. Models and bundles use it.
 */
export async function checkout(
  store: ModelStore,
  label: string,
  digest: string,
  list: readonly ModelFile[],
): Promise<{ dir: string; files: Record<string, string> }> {
  const dir = checkoutDir(store, digest)
  const files = Object.fromEntries(list.map((f) => [f.path, join(dir, f.path)]))
  const complete = (): boolean =>
    list.every((f) => {
      try {
        return statSync(join(dir, f.path)).size === f.size
      } catch {
        return false
      }
    })
  if (existsSync(dir) && complete()) return { dir, files }
  for (const f of list) {
    if (!store.blobs.has(f.sha256))
      throw new BundleError(
        'E_STORE_CORRUPT',
        `${label}: file ${f.path} (blob ${f.sha256.slice(0, 12)}) is missing from the store`,
      )
  }
  const staging = tempName(store.layout.tmp, 'checkout')
  try {
    for (const f of list) {
      const dest = join(staging, f.path)
      mkdirSync(dirname(dest), { recursive: true })
      try {
        linkSync(store.blobs.path(f.sha256), dest)
      } catch {
        copyFileSync(store.blobs.path(f.sha256), dest) // file systems without hard links
      }
    }
    if (existsSync(dir) && !complete()) {
      // An incomplete checkout left by a crash: move it aside first, so a checkout another
      // process completes meanwhile is never the one removed.
      const aside = tempName(store.layout.tmp, 'stale')
      try {
        renameSync(dir, aside)
      } catch {
        // someone else moved or completed it
      }
      await removeQuietly(aside)
    }
    try {
      renameSync(staging, dir)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (!(code === 'ENOTEMPTY' || code === 'EEXIST') || !complete()) throw err
      // another process materialized it first
    }
  } catch (err) {
    throw ioError(err, `preparing files of ${label}`)
  } finally {
    await removeQuietly(staging)
  }
  return { dir, files }
}
