import { existsSync, statSync } from 'node:fs'
import { dirname, join, resolve, sep } from 'node:path'
import { BundleError } from '../../errors/index.js'

/**
 * Where an export writes: `out` as a file, or `defaultName` inside `out` when it is a directory.
 * A path that ends in "/" names a directory, so it must exist (resolve() would drop the slash
 * and quietly write a file of that name instead); so must the directory a file goes into.
 */
export function exportTarget(out: string | undefined, defaultName: string): string {
  if (out === undefined) return resolve(defaultName)
  const asDir = out.endsWith('/') || out.endsWith(sep)
  const path = resolve(out)
  const isDir = existsSync(path) && statSync(path).isDirectory()
  if (isDir) return join(path, defaultName)
  if (asDir)
    throw new BundleError(
      'E_EXPORT_DIR_NOT_FOUND',
      `directory ${out} does not exist; create it first (mkdir -p ${out}) or give a file name`,
    )
  if (!existsSync(dirname(path)) || !statSync(dirname(path)).isDirectory())
    throw new BundleError(
      'E_EXPORT_DIR_NOT_FOUND',
      `directory ${dirname(path)} does not exist; create it first (mkdir -p ${dirname(path)}) or write elsewhere`,
    )
  return path
}
