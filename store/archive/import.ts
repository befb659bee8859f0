import { BundleError } from '../../errors/index.js'
import type { StagedBlob } from '../blobs.js'
import { modelDigest } from '../digest.js'
import type { ModelStore } from '../model-store.js'
import { readOnnxSignature } from '../onnx-signature.js'
import type { ImportStatus, ModelInfo, ProgressFn, Signatures } from '../types.js'
import { FILES_PREFIX, MANIFEST_NAME, parseManifest, type ArchiveManifest } from './manifest.js'
import { readArchive } from './reader.js'

export interface ImportOptions {
  /** Replace a different model stored under the same tag. */
  force?: boolean
  onProgress?: ProgressFn
  /** Largest total of file bytes accepted (default $BUNDLE_IMPORT_MAX_BYTES or 64 GiB). */
  maxBytes?: number
}

const DEFAULT_MAX_BYTES = 64 * 1024 ** 3

export function importLimit(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.BUNDLE_IMPORT_MAX_BYTES)
  return Number.isSafeInteger(v) && v > 0 ? v : DEFAULT_MAX_BYTES
}

/**
 * Imports a `.bundlemodel`. Everything is checked before anything is committed (see
 * readArchive: manifest first, entry types, paths, sizes, sha256s) and then the model digest.
 * A failure leaves the store unchanged.
 */
export async function importModel(
  store: ModelStore,
  file: string,
  options: ImportOptions = {},
): Promise<{ model: ModelInfo; status: ImportStatus }> {
  const maxBytes = options.maxBytes ?? importLimit()
  const { manifest, staged } = await readArchive<ArchiveManifest>(store, file, {
    manifestName: MANIFEST_NAME,
    parse: (text) => parseManifest(text, maxBytes),
    entries: (m) => m.files.map((f) => ({ entry: FILES_PREFIX + f.path, size: f.size, sha256: f.sha256 })),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  })
  const blobs: StagedBlob[] = manifest.files.map((f) => staged.get(FILES_PREFIX + f.path)!)
  try {
    if (modelDigest(manifest.files) !== manifest.digest)
      throw new BundleError(
        'E_ARCHIVE_CHECKSUM',
        `model digest ${manifest.digest} does not match its files (${modelDigest(manifest.files)})`,
      )
    // Signatures are re-read from the files, not trusted from the manifest.
    const signatures: Signatures = {}
    if (manifest.framework === 'onnx') {
      for (const [i, f] of manifest.files.entries())
        if (f.path.endsWith('.onnx')) signatures[f.path] = await readOnnxSignature(blobs[i]!.tmpPath, f.path)
    }
    const { info, status } = await store.commit(
      {
        name: manifest.name,
        version: manifest.version,
        framework: manifest.framework,
        digest: manifest.digest,
        size: manifest.size,
        labels: manifest.labels,
        metadata: manifest.metadata,
        signatures,
        files: manifest.files,
        createdAt: Date.parse(manifest.created),
      },
      blobs,
      options.force ? 'replace' : 'same-digest-ok',
      // Stored with the model's row; a model already stored keeps the signature it has.
      manifest.modelSig,
    )
    return { model: info, status }
  } catch (err) {
    await store.blobs.discard(blobs)
    throw err
  }
}
