import { readdirSync, type Stats, statSync } from 'node:fs'
import { basename, join, relative, sep } from 'node:path'
import { BundleError } from '../errors/index.js'
import { findPathConflict, isSafeModelPath } from './model-path.js'

export interface InputFile {
  /** Path inside the model. */
  path: string
  source: string
  size: number
}

function walk(dir: string, root: string, out: InputFile[], seen: Set<string>): void {
  const here = statSync(dir)
  const id = `${here.dev}:${here.ino}`
  if (seen.has(id))
    throw new BundleError('E_STORE_FILE_NOT_FOUND', `${dir}: a symbolic link loops back to a directory already saved`)
  seen.add(id)
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = join(dir, entry.name)
    let st: Stats
    try {
      st = statSync(full) // follows symlinks: the model stores what they point at
    } catch (err) {
      throw new BundleError(
        'E_STORE_FILE_NOT_FOUND',
        `${full}: ${
          (err as NodeJS.ErrnoException).code === 'ELOOP'
            ? 'symbolic link loop'
            : 'broken symbolic link or unreadable file'
        }`,
      )
    }
    if (st.isDirectory()) walk(full, root, out, seen)
    // A directory's model.sig is the model's signature (OMS v1.0), never one of its files.
    else if (dir === root && entry.name === SIGNATURE_FILE) continue
    else if (st.isFile()) out.push({ path: relative(root, full).split(sep).join('/'), source: full, size: st.size })
  }
}

/** The signature file a model directory may carry beside its files (model_signing's name). */
export const SIGNATURE_FILE = 'model.sig'

/** The model.sig at the root of a directory among save's PATH arguments, if one is there. */
export function signatureInput(paths: readonly string[]): string | undefined {
  for (const p of paths) {
    const file = join(p, SIGNATURE_FILE)
    try {
      if (statSync(p).isDirectory() && statSync(file).isFile()) return file
    } catch {
      // no signature there
    }
  }
  return undefined
}

/** Expands save's PATH arguments into the model's file list (files by name, directories recursively). */
export function collectInputs(paths: readonly string[]): InputFile[] {
  if (paths.length === 0)
    throw new BundleError('E_STORE_FILE_NOT_FOUND', 'no files given: pass at least one file or directory to save')
  const out: InputFile[] = []
  for (const p of paths) {
    let st: Stats
    try {
      st = statSync(p)
    } catch {
      throw new BundleError('E_STORE_FILE_NOT_FOUND', `${p}: no such file or directory`)
    }
    if (st.isDirectory()) {
      try {
        walk(p, p, out, new Set())
      } catch (err) {
        if (err instanceof BundleError) throw err
        throw new BundleError('E_STORE_FILE_NOT_FOUND', `${p}: cannot read the directory (${(err as Error).message})`)
      }
    } else if (st.isFile()) out.push({ path: basename(p), source: p, size: st.size })
    else throw new BundleError('E_STORE_FILE_NOT_FOUND', `${p} is not a regular file or directory`)
  }
  if (out.length === 0) throw new BundleError('E_STORE_FILE_NOT_FOUND', `no files found in ${paths.join(', ')}`)
  const conflict = findPathConflict(out.map((f) => f.path))
  if (conflict)
    throw new BundleError(
      'E_STORE_FILE_DUPLICATE',
      `"${conflict[0]}" would be both a file and the directory of "${conflict[1]}"`,
    )
  const seen = new Map<string, string>()
  for (const f of out) {
    if (!isSafeModelPath(f.path))
      throw new BundleError('E_STORE_FILE_NOT_FOUND', `${f.source}: its name cannot be stored as a model file path`)
    const prior = seen.get(f.path)
    if (prior !== undefined)
      throw new BundleError('E_STORE_FILE_DUPLICATE', `${prior} and ${f.source} would both be stored as "${f.path}"`)
    seen.set(f.path, f.source)
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}
