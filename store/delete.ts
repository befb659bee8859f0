import { BundleError } from '../errors/index.js'
import { collectUnused } from './collect.js'
import { strip } from './model-index.js'
import type { ModelStore } from './model-store.js'
import { MODEL, resolveMany } from './resolve.js'
import { MODEL_NAMES, parseTag } from './tag.js'
import type { ModelInfo } from './types.js'

export interface DeleteOptions {
  /** Delete even when a stored bundle references the model. */
  force?: boolean
  /** Treat each tag as a name and delete every version of it. */
  allVersions?: boolean
}

/** ModelStore.delete: refuses (deleting nothing) if any model is referenced by a bundle, unless `force`. */
export function deleteModels(store: ModelStore, tags: readonly string[], options: DeleteOptions = {}): ModelInfo[] {
  if (tags.length === 0) throw new BundleError('E_STORE_TAG_INVALID', 'no tag given to delete')
  for (const t of tags) parseTag(t, MODEL_NAMES) // every tag is checked before anything is deleted
  const deleted = store.write(() => {
    const targets = resolveMany(store.index, tags, MODEL, options.allVersions)
    if (!options.force) {
      const used = targets.flatMap((m) => store.index.refs(m.id).map((r) => `${m.tag} (used by ${r.kind} ${r.ref})`))
      if (used.length)
        throw new BundleError(
          'E_STORE_MODEL_REFERENCED',
          `refusing to delete: ${used.join(', ')}; delete those first or pass --force`,
          { details: { references: used } },
        )
    }
    for (const m of targets) store.index.remove(m.id)
    return targets
  })
  try {
    collectUnused(
      store,
      deleted.flatMap((m) => m.files.map((f) => f.sha256)),
      deleted.map((m) => m.digest),
    )
  } catch {
    // the delete committed; blobs left behind are reclaimed by `gc`
  }
  return deleted.map(strip)
}
