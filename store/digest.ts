import { createHash } from 'node:crypto'
import type { ModelFile } from './types.js'

/**
 * The model digest covers content only — each file's path, size and sha256, sorted by path —
 * so the same files give the same digest in any store, under any tag, after export/import.
 */
export function modelDigest(files: readonly ModelFile[]): string {
  const canonical = [...files]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((f) => `${f.sha256}  ${f.size}  ${f.path}\n`)
    .join('')
  return `sha256:${createHash('sha256').update(canonical).digest('hex')}`
}
