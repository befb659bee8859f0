import { readFileSync } from 'node:fs'
import { BundleError } from '../errors/index.js'
import type { StagedBlob } from './blobs.js'
import { commitModel } from './commit.js'
import { modelDigest } from './digest.js'
import { collectInputs, signatureInput } from './inputs.js'
import { validateLabels, validateMetadata } from './labels.js'
import type { NewModel } from './model-index.js'
import type { ModelStore } from './model-store.js'
import { readOnnxSignature } from './onnx-signature.js'
import { formatTag, MODEL_NAMES, validateName, validateVersion } from './tag.js'
import {
  FRAMEWORKS,
  type Framework,
  type ModelInfo,
  type ProgressFn,
  type SaveInput,
  type Signatures,
} from './types.js'
import { generateVersion } from './version-id.js'

/** ModelStore.save: stores files as a new model version. Nothing is visible until every blob is durable. */
export async function saveModel(
  store: ModelStore,
  input: SaveInput,
  options: { onProgress?: ProgressFn; adoptSignature?: boolean } = {},
): Promise<ModelInfo> {
  const name = validateName(input.name, MODEL_NAMES)
  const createdAt = Date.now()
  const version = input.version === undefined ? generateVersion(createdAt) : validateVersion(input.version, name)
  const labels = validateLabels(input.labels)
  const metadata = validateMetadata(input.metadata)
  const files = collectInputs(input.paths)
  const framework = pickFramework(
    input.framework,
    files.map((f) => f.path),
  )
  if (store.index.exact(name, version) !== undefined) {
    throw new BundleError(
      'E_STORE_TAG_EXISTS',
      `${formatTag(name, version)} already exists; choose another --version or delete it first`,
    )
  }
  // Signatures first: a broken .onnx fails before a single byte is written to the store.
  const signatures: Signatures = {}
  if (framework === 'onnx') {
    for (const f of files) if (f.path.endsWith('.onnx')) signatures[f.path] = await readOnnxSignature(f.source, f.path)
  }
  const total = files.reduce((n, f) => n + f.size, 0)
  let done = 0
  const staged: StagedBlob[] = []
  try {
    for (const f of files) {
      options.onProgress?.({ phase: 'hash', done, total, file: f.path })
      staged.push(
        await store.blobs.stageFile(f.source, (n) => {
          done += n
          options.onProgress?.({ phase: 'hash', done, total, file: f.path })
        }),
      )
    }
  } catch (err) {
    await store.blobs.discard(staged)
    throw err
  }
  const modelFiles = files.map((f, i) => ({ path: f.path, sha256: staged[i]!.sha256, size: staged[i]!.size }))
  const model: NewModel = {
    name,
    version,
    framework,
    digest: modelDigest(modelFiles),
    size: modelFiles.reduce((n, f) => n + f.size, 0),
    labels,
    metadata,
    signatures,
    files: modelFiles,
    createdAt,
  }
  // A signed directory (its model.sig beside the files) keeps its signature, stored with the model's
  // row; verification judges it.
  const sig = options.adoptSignature === false ? undefined : signatureInput(input.paths)
  const { info } = await commitModel(
    store,
    model,
    staged,
    'fail',
    sig === undefined ? undefined : readFileSync(sig, 'utf8'),
  )
  return info
}

function pickFramework(requested: Framework | undefined, paths: string[]): Framework {
  const hasOnnx = paths.some((p) => p.endsWith('.onnx'))
  if (requested === undefined) return hasOnnx ? 'onnx' : 'custom'
  if (!FRAMEWORKS.includes(requested))
    throw new BundleError(
      'E_STORE_FRAMEWORK_INVALID',
      `unknown framework "${requested}"; use ${FRAMEWORKS.join(' or ')}`,
    )
  if (requested === 'onnx' && !hasOnnx)
    throw new BundleError(
      'E_STORE_FRAMEWORK_INVALID',
      'framework onnx needs at least one .onnx file among the saved files',
    )
  return requested
}
