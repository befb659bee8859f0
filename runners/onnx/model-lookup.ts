import { BundleError, isBundleError } from '../../errors/index.js'
import { type ModelInfo, type ModelStore, saveCommand } from '../../store/index.js'

/**
 * The model a runner serves, from the store: `tag` as it resolves now, or exactly the version
 * and content a bundle pins. Each way it can be missing says what to do about it.
 */
export function lookUpModel(
  store: ModelStore,
  runner: string,
  tag: string,
  pinned: { tag: string; digest: string } | undefined,
): { info: ModelInfo; onnxPath: string } {
  let info: ModelInfo
  try {
    info = store.get(tag)
  } catch (err) {
    if (!isBundleError(err) || err.code !== 'E_STORE_MODEL_NOT_FOUND') throw err
    if (pinned) {
      throw new BundleError(
        'E_BUNDLE_MODEL_MISMATCH',
        `runner ${runner}: the bundle pins ${tag}, which is not in the store at ${store.home}; ` +
          "import the bundle's archive (it carries its models)",
      )
    }
    throw new BundleError(
      'E_STORE_MODEL_NOT_FOUND',
      `runner ${runner} needs model ${tag}: ${(err as Error).message}; add it with: ${saveCommand(tag)}`,
    )
  }
  if (pinned && info.digest !== pinned.digest) {
    throw new BundleError(
      'E_BUNDLE_MODEL_MISMATCH',
      `runner ${runner}: the bundle pins ${tag} with digest ${pinned.digest}, the store has ${info.digest}`,
    )
  }
  const onnx = info.files.find((f) => f.path.endsWith('.onnx'))
  if (onnx === undefined) throw new BundleError('E_STORE_FRAMEWORK_INVALID', `model ${tag} has no .onnx file`)
  return { info, onnxPath: onnx.path }
}
