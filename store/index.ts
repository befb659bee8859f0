// The model store: SQLite index + content-addressed blobs. Imports nothing of ours but errors/.
export { ModelStore, type OpenOptions, type DeleteOptions } from './model-store.js'
export { BundleStore, type SaveBundleInput } from './bundle-store.js'
export {
  parseTag,
  formatTag,
  saveCommand,
  validateName,
  validateVersion,
  MODEL_NAMES,
  BUNDLE_NAMES,
  type NameRule,
  type TagQuery,
} from './tag.js'
export { parseLabelArgs, parseMetadataArg, validateLabels, validateMetadata, type Labels } from './labels.js'
export { generateVersion } from './version-id.js'
export { defaultHome } from './home.js'
export { ARCHIVE_EXTENSION, defaultArchiveName } from './archive/export.js'
export { importLimit, type ImportOptions } from './archive/import.js'
export type {
  BundleInfo,
  BundleModelRef,
  Framework,
  GcReport,
  GraphSignature,
  ImportStatus,
  ListFilter,
  ModelFile,
  ModelInfo,
  ModelPaths,
  ModelSummary,
  Progress,
  ProgressFn,
  SaveInput,
  Signatures,
  TensorSignature,
  VerifyReport,
} from './types.js'
export { FRAMEWORKS } from './types.js'
export { generateKeys, keyHint, loadPrivateKey, loadTrustedKey, type TrustedKey } from './signing/keys.js'
export { BUNDLE_MEDIA_TYPE, PAYLOAD_TYPE, pae, type SignatureBundle } from './signing/envelope.js'
export { PREDICATE_TYPE, statementFor, subjectDigest, type Statement } from './signing/statement.js'
export { compareFiles, hashFiles, type FileOnDisk, type Verified, verifyFiles } from './signing/verify.js'
export {
  putSignature,
  signatureHint,
  signedModelDir,
  signModel,
  storedSignature,
  verifyModel,
} from './signing/model-signatures.js'
export {
  BUNDLE_SIG,
  signBundle,
  signedBundleDir,
  storedBundleSignature,
  verifyBundle,
  verifyBundleDir,
} from './signing/bundle-signatures.js'
