import { statSync, unlinkSync } from 'node:fs'
import { checkoutDir } from './checkout.js'
import { removeQuietly } from './fs-util.js'
import type { ModelStore } from './model-store.js'

/**
 * Removes blobs (and checkouts) nobody references or leases. Runs inside a write
 * transaction so a writer cannot lease a digest between the check and the unlink.
 */
export function collectUnused(
  store: ModelStore,
  blobs: Iterable<string>,
  digests: Iterable<string> = [],
): { blobs: number; bytes: number } {
  const candidates = [...new Set(blobs)]
  const modelDigests = [...new Set(digests)]
  if (candidates.length === 0 && modelDigests.length === 0) return { blobs: 0, bytes: 0 }
  return store.write(() => {
    let n = 0
    let bytes = 0
    for (const sha of candidates) {
      if (store.index.isBlobInUse(sha)) continue
      const file = store.blobs.path(sha)
      try {
        bytes += statSync(file).size
        unlinkSync(file)
        n++
      } catch {
        // already gone
      }
    }
    for (const d of modelDigests) if (!store.index.isDigestInUse(d)) void removeQuietly(checkoutDir(store, d))
    return { blobs: n, bytes }
  })
}
