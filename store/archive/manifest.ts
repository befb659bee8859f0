import { BundleError } from '../../errors/index.js'
import { validateLabels, validateMetadata } from '../labels.js'
import { findPathConflict, isSafeModelPath } from '../model-path.js'
import { MODEL_NAMES, validateName, validateVersion } from '../tag.js'
import { FRAMEWORKS, type Framework, type ModelFile, type ModelInfo, type Signatures } from '../types.js'

export const MANIFEST_NAME = 'manifest.json'
export const FILES_PREFIX = 'files/'
export const MANIFEST_KIND = 'modelbundle/model'
export const FORMAT_VERSION = 1
export const MAX_MANIFEST_BYTES = 1024 * 1024
/** The first entry of a `.bundle` archive (a bundle and the models it pins). */
export const BUNDLE_MANIFEST_NAME = 'bundle-archive.json'

/**
 * Each archive kind by its first entry, and the command that imports it: an archive given to the
 * other import command is named for what it is.
 */
export const ARCHIVE_KINDS: Readonly<Record<string, { kind: string; importCommand: string }>> = {
  [MANIFEST_NAME]: { kind: 'a model archive', importCommand: 'bundle models import' },
  [BUNDLE_MANIFEST_NAME]: { kind: 'a bundle archive', importCommand: 'bundle import' },
}

/** The first entry of a `.bundlemodel` archive: the model's record without its tag, plus a format header. */
export type ArchiveManifest = { kind: typeof MANIFEST_KIND; formatVersion: number } & Omit<ModelInfo, 'tag'> & {
    /** The model's signature (model.sig, an OMS v1.0 Sigstore bundle) as stored, when it is signed. */
    modelSig?: string
  }

export function manifestOf(m: ModelInfo, modelSig?: string): ArchiveManifest {
  return {
    ...(modelSig !== undefined ? { modelSig } : {}),
    kind: MANIFEST_KIND,
    formatVersion: FORMAT_VERSION,
    name: m.name,
    version: m.version,
    framework: m.framework,
    digest: m.digest,
    size: m.size,
    labels: m.labels,
    metadata: m.metadata,
    signatures: m.signatures,
    created: m.created,
    files: m.files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size })),
  }
}

/**
 * The `files` list of an untrusted archive manifest: non-empty, safe relative paths, no path
 * twice or both a file and a directory, 64-hex sha256s, non-negative sizes. Model and bundle
 * archives both use it.
 */
export function parseFileList(raw: unknown, bad: (why: string) => BundleError): { files: ModelFile[]; total: number } {
  if (!Array.isArray(raw) || raw.length === 0) throw bad('files must be a non-empty array')
  const seen = new Set<string>()
  let total = 0
  const files: ModelFile[] = raw.map((f: unknown, i: number) => {
    const file = f as Record<string, unknown>
    if (file === null || typeof file !== 'object') throw bad(`files[${i}] is not an object`)
    if (typeof file.path !== 'string' || !isSafeModelPath(file.path))
      throw new BundleError(
        'E_ARCHIVE_UNSAFE_ENTRY',
        `archive manifest lists an unsafe file path ${JSON.stringify(file.path)}`,
      )
    if (seen.has(file.path))
      throw new BundleError('E_ARCHIVE_UNSAFE_ENTRY', `archive manifest lists "${file.path}" twice`)
    seen.add(file.path)
    if (typeof file.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(file.sha256))
      throw bad(`files[${i}].sha256 must be 64 hex digits`)
    if (typeof file.size !== 'number' || !Number.isSafeInteger(file.size) || file.size < 0)
      throw bad(`files[${i}].size must be a non-negative integer`)
    total += file.size
    return { path: file.path, sha256: file.sha256, size: file.size }
  })
  const conflict = findPathConflict(files.map((f) => f.path))
  if (conflict)
    throw new BundleError(
      'E_ARCHIVE_UNSAFE_ENTRY',
      `archive manifest lists "${conflict[0]}" both as a file and as the directory of "${conflict[1]}"`,
    )
  return { files, total }
}

const bad = (why: string): BundleError => new BundleError('E_ARCHIVE_MANIFEST_INVALID', `archive manifest: ${why}`)

/** Validates an untrusted manifest field by field; anything unexpected is refused, not repaired. */
export function parseManifest(text: string, maxBytes: number): ArchiveManifest {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    throw bad('not valid JSON')
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad('not a JSON object')
  const m = raw as Record<string, unknown>
  if (m.kind !== MANIFEST_KIND) throw bad(`kind is ${JSON.stringify(m.kind)}, expected "${MANIFEST_KIND}"`)
  if (m.formatVersion !== FORMAT_VERSION)
    throw bad(
      `format version ${JSON.stringify(m.formatVersion)} is not supported (this modelbundle reads ${FORMAT_VERSION})`,
    )
  if (typeof m.name !== 'string' || typeof m.version !== 'string') throw bad('name and version must be strings')
  try {
    validateName(m.name, MODEL_NAMES)
    validateVersion(m.version, m.name)
  } catch (err) {
    throw bad((err as Error).message)
  }
  if (!FRAMEWORKS.includes(m.framework as Framework)) throw bad(`unknown framework ${JSON.stringify(m.framework)}`)
  if (typeof m.created !== 'string' || Number.isNaN(Date.parse(m.created))) throw bad('created must be an ISO date')
  if (typeof m.digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(m.digest))
    throw bad('digest must be sha256:<64 hex>')
  const { files, total } = parseFileList(m.files, bad)
  if (m.framework === 'onnx' && !files.some((f) => f.path.endsWith('.onnx')))
    throw bad('framework is onnx but no .onnx file is listed')
  if (total > maxBytes) {
    throw new BundleError(
      'E_ARCHIVE_TOO_LARGE',
      `archive declares ${total} bytes of files; the import limit is ${maxBytes} (BUNDLE_IMPORT_MAX_BYTES)`,
    )
  }
  if (m.size !== total) throw bad(`size ${JSON.stringify(m.size)} does not equal the sum of file sizes ${total}`)
  let labels: Record<string, string>
  let metadata: Record<string, unknown>
  try {
    labels = validateLabels(m.labels)
    metadata = validateMetadata(m.metadata)
  } catch (err) {
    throw bad((err as Error).message)
  }
  // Carried as it is: verification (when trust is set) decides whether it holds.
  if (m.modelSig !== undefined && (typeof m.modelSig !== 'string' || m.modelSig.length > 256 * 1024))
    throw bad('modelSig must be the text of a model signature (at most 256 KiB)')
  const signatures = (m.signatures ?? {}) as Signatures
  if (signatures === null || typeof signatures !== 'object' || Array.isArray(signatures))
    throw bad('signatures must be an object')
  return {
    kind: MANIFEST_KIND,
    formatVersion: FORMAT_VERSION,
    name: m.name,
    version: m.version,
    framework: m.framework as Framework,
    digest: m.digest,
    size: total,
    labels,
    metadata,
    signatures,
    created: new Date(m.created).toISOString(),
    files,
    ...(m.modelSig !== undefined ? { modelSig: m.modelSig as string } : {}),
  }
}
