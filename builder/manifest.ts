import type { EnsembleSpec } from './config.js'
import type { BundleModelRef } from '../store/index.js'

/** bundle.json: what a bundle is. No creation time and no version: the same inputs give the same bytes. */
export interface BundleManifest {
  [key: string]: unknown
  schema: 1
  name: string
  description?: string
  service: {
    /** The compiled entry, relative to the bundle root. */
    entry: string
    /** The export holding the service class. */
    export: string
    /**
     * The service's own name (its metrics' `service` label), which bundle.yaml's `name:` may
     * differ from. Absent in bundles built before it was recorded: the bundle's name stands in.
     */
    name?: string
  }
  apis: { name: string; route: string; input: string; output: string }[]
  runners: { name: string; kind: string; tag?: string }[]
  /** Every model, pinned: exact tag and digest; `requested`: the runner tags that resolved to it. */
  models: (BundleModelRef & { requested?: string[] })[]
  env: Record<string, string>
  /** Declarative pipelines of the service's runners, from bundle.yaml (served next to the runners). */
  ensembles?: Record<string, EnsembleSpec>
  docker: { baseImage: string; systemPackages: string[]; gpu: false | { baseImage: string }; user: string }
  /** The npm packages the code imports, at the exact versions it was built against. */
  dependencies: Record<string, string>
  /** Everything those need in turn (`name@version`), as installed when it was built. */
  packages: string[]
  /** Node.js major version it was built with. */
  node: string
}

export const MANIFEST_FILE = 'bundle.json'
export const DEFAULT_BASE_IMAGE = 'node:20-bookworm-slim'
export const DEFAULT_GPU_BASE_IMAGE = 'nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04'
/** The non-root user id images run as. */
export const IMAGE_UID = 10001
