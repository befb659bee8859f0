import type { Labels } from './labels.js'

export type Framework = 'onnx' | 'custom'
export const FRAMEWORKS: readonly Framework[] = ['onnx', 'custom']

/**
 * One input or output of an ONNX graph. Variable dimensions are -1 in `shape`; their symbolic names (if any) are in
 * `dimNames`.
 */
export interface TensorSignature {
  name: string
  dtype: string
  shape: number[]
  dimNames: (string | null)[]
}

export interface GraphSignature {
  inputs: TensorSignature[]
  outputs: TensorSignature[]
}

/** Signatures keyed by the model file they were read from (a model may hold several graphs). */
export type Signatures = Record<string, GraphSignature>

export interface ModelFile {
  /** Relative POSIX path inside the model, e.g. `model.onnx` or `vocab/keys.txt`. */
  path: string
  sha256: string
  size: number
}

/** What the store knows about one model version. This is the stable `-o json` shape. */
export interface ModelInfo {
  tag: string
  name: string
  version: string
  framework: Framework
  /** `sha256:<hex>` over the sorted file list (paths, sizes, checksums): equal content, equal digest. */
  digest: string
  size: number
  labels: Labels
  metadata: Record<string, unknown>
  signatures: Signatures
  files: ModelFile[]
  /** ISO 8601, UTC. */
  created: string
}

/** What `bundle models list` shows in a table. */
export type ModelSummary = Pick<
  ModelInfo,
  'tag' | 'name' | 'version' | 'framework' | 'digest' | 'size' | 'labels' | 'created'
>

export interface SaveInput {
  name: string
  version?: string
  /** Files and directories; a directory contributes its files under their relative paths. */
  paths: readonly string[]
  framework?: Framework
  labels?: Labels
  metadata?: Record<string, unknown>
}

export interface Progress {
  phase: 'hash' | 'export' | 'import'
  /** Bytes done and total for the whole operation. */
  done: number
  total: number
  file?: string
}

export type ProgressFn = (p: Progress) => void

export interface ListFilter {
  name?: string
  /** `key: value` must match; `key: true` only requires the key. */
  labels?: Record<string, string | true>
}

export interface ModelPaths {
  model: ModelInfo
  /** A directory holding the model's files under their own names (read-only hard links to the blobs). */
  dir: string
  /** Relative path → absolute path inside `dir`. */
  files: Record<string, string>
}

export interface VerifyReport {
  models: number
  blobs: number
  bytes: number
  missing: { sha256: string; models: string[] }[]
  corrupt: { sha256: string; models: string[] }[]
  /** Leftovers of interrupted writes; harmless, reclaimed by `gc`. */
  garbage: { blobs: number; tempFiles: number; staleLeases: number; checkouts: number }
  ok: boolean
}

export interface GcReport {
  blobs: number
  bytes: number
  tempFiles: number
  staleLeases: number
  checkouts: number
}

export type ImportStatus = 'imported' | 'already-present' | 'replaced'

/** A model a bundle uses, pinned: exact tag and content digest (and the name the service knows it by). */
export interface BundleModelRef {
  tag: string
  digest: string
  alias?: string
}

/**
 * What the store knows about one bundle version. This is the stable `bundle list -o json` shape (plus files and
 * manifest in `get`).
 */
export interface BundleInfo {
  tag: string
  name: string
  version: string
  /** `sha256:<hex>` over the sorted file list: building the same inputs gives the same digest. */
  digest: string
  size: number
  models: BundleModelRef[]
  labels: Labels
  /** ISO 8601, UTC; not part of the digest. */
  created: string
  manifest: Record<string, unknown>
  files: ModelFile[]
}
