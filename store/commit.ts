import { randomUUID } from 'node:crypto'
import { BundleError } from '../errors/index.js'
import type { StagedBlob } from './blobs.js'
import { collectUnused } from './collect.js'
import { HOST } from './fs-util.js'
import { strip, type NewModel } from './model-index.js'
import type { ModelStore } from './model-store.js'
import type { ImportStatus, ModelInfo } from './types.js'
import { hasSignatureRow, writeSignatureRow } from './signing/model-signatures.js'

/** How a commit treats an existing model under the same tag. */
export type OnExisting = 'fail' | 'same-digest-ok' | 'replace'

/**
 * Places staged blobs and inserts the model, shared by save and import.
 * Order: lease digests → place blobs (fsynced) → insert row and drop lease in one transaction.
 */
export async function commitModel(
  store: ModelStore,
  model: NewModel,
  staged: readonly StagedBlob[],
  onExisting: OnExisting,
  /** The model's signature (model.sig text), written in the same transaction as its row. */
  signature?: string,
): Promise<{ info: ModelInfo; status: ImportStatus }> {
  const owner = randomUUID()
  const garbage = new Set<string>()
  const oldDigests: string[] = []
  try {
    const now = Date.now()
    store.write(() => {
      for (const s of staged) store.index.lease(s.sha256, owner, HOST, process.pid, now)
    })
    for (const s of staged) store.blobs.place(s)
    return store.write(() => {
      const existing = store.index.exact(model.name, model.version)
      let status: ImportStatus = 'imported'
      if (existing !== undefined) {
        // Same content is never "replaced": that would only churn ids and drop references.
        if (onExisting !== 'fail' && existing.digest === model.digest) {
          // A model already stored keeps the signature it has; one without takes this one.
          if (signature !== undefined && !hasSignatureRow(store, existing.id))
            writeSignatureRow(store, existing.id, signature)
          return { info: strip(existing), status: 'already-present' as const }
        }
        if (onExisting !== 'replace') {
          throw new BundleError(
            'E_STORE_TAG_EXISTS',
            `${existing.tag} already exists with different content (${existing.digest}); ` +
              `${onExisting === 'fail' ? 'choose another --version or delete it first' : 'pass --force to replace it'}`,
          )
        }
        const refs = store.index.refs(existing.id)
        if (refs.length > 0) {
          throw new BundleError(
            'E_STORE_MODEL_REFERENCED',
            `refusing to replace ${existing.tag}: used by ${refs.map((r) => `${r.kind} ${r.ref}`).join(', ')}; ` +
              `import it under another version or delete those first`,
          )
        }
        store.index.remove(existing.id)
        for (const f of existing.files) garbage.add(f.sha256)
        oldDigests.push(existing.digest)
        status = 'replaced'
      }
      const id = store.index.insert(model)
      if (signature !== undefined) writeSignatureRow(store, id, signature)
      store.index.dropLeases(owner)
      return { info: strip(store.index.byId(id)!), status }
    })
  } finally {
    // Staged digests are only candidates: collect keeps every blob a committed row uses.
    for (const s of staged) garbage.add(s.sha256)
    await store.blobs.discard(staged) // no-op for placed blobs: their temp names are gone
    try {
      store.write(() => store.index.dropLeases(owner))
      collectUnused(store, garbage, oldDigests)
    } catch {
      // Leftovers are reclaimed by `gc`; never mask the original outcome.
    }
  }
}
