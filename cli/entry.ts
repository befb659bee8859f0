import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { BundleError } from '../errors/index.js'
import type { ServiceDefinition } from '../framework/index.js'
import type { TrustedKey } from '../store/index.js'
import { loadService, parseEntry } from './load-service.js'
import { isBundleDir, loadBundle } from './serve-bundle.js'
import { isProjectDir, loadProject, projectConfigFor } from './serve-source.js'

export interface Entry {
  definition: ServiceDefinition
  /**
   * Names this exact service for remote queues: a bundle's name and a digest of its manifest
   * and compiled code (the same on every machine), or a source service's name.
   */
  scope: string
}

async function fromBundleDir(dir: string): Promise<Entry> {
  const { definition, manifest } = await loadBundle(dir)
  const digest = createHash('sha256')
    .update(readFileSync(join(dir, 'bundle.json')))
    .update(readFileSync(join(dir, manifest.service.entry)))
    .digest('hex')
  return { definition, scope: `${manifest.name}-${digest.slice(0, 12)}` }
}

/**
 * With trust set, a bundle is verified before any of its code is loaded: its signature, every
 * file, and each pinned model (signature and files). A service's source is not a bundle: only its
 * models are verified, each before it loads.
 */
async function verifiedBundleDir(dir: string, trust: readonly TrustedKey[] | undefined, tag?: string): Promise<void> {
  if (trust === undefined) return
  const { ModelStore, verifyBundle, verifyBundleDir } = await import('../store/index.js')
  const store = ModelStore.open()
  try {
    await (tag === undefined ? verifyBundleDir(store, dir, trust) : verifyBundle(store, tag, trust))
  } finally {
    store.close()
  }
}

/**
 * A bundle directory, a project directory (bundle.yaml), a service source file, or a stored
 * bundle's tag — in that order. A source file that a bundle.yaml names as its `service:` is
 * served with that bundle.yaml's model pins, env and ensembles, as its bundle would be. With
 * `trust`, a bundle is verified before anything of it runs.
 */
export async function resolveEntry(entry: string, trust?: readonly TrustedKey[]): Promise<Entry> {
  if (isBundleDir(entry)) {
    await verifiedBundleDir(resolve(entry), trust)
    return fromBundleDir(resolve(entry))
  }
  if (isProjectDir(entry)) {
    const { readBundleConfig } = await import('../builder/index.js')
    const definition = await loadProject(await readBundleConfig(resolve(entry)))
    return { definition, scope: definition.name }
  }
  let source: { file: string; className?: string } | undefined
  try {
    source = parseEntry(entry)
  } catch {
    // not a file entry: maybe a tag
  }
  // Something that looks like a source file is one (a missing file says so); anything else is a tag.
  if (source !== undefined) {
    const cfg = existsSync(source.file) ? await projectConfigFor(source.file, source.className) : undefined
    const definition = cfg ? await loadProject(cfg, entry) : await loadService(entry)
    return { definition, scope: definition.name }
  }
  const { ModelStore, parseTag } = await import('../store/index.js')
  try {
    parseTag(entry)
  } catch {
    throw new BundleError(
      'E_SERVICE_LOAD',
      `"${entry}" is neither a service file (path/to/service.ts[:ClassName]), a directory holding bundle.yaml or ` +
        `bundle.json, nor a bundle tag`,
    )
  }
  const store = ModelStore.open()
  try {
    const { bundle, dir } = await store.bundles.paths(entry)
    await verifiedBundleDir(dir, trust, bundle.tag)
    return await fromBundleDir(dir)
  } finally {
    store.close()
  }
}

/** The Redis URL from --redis or BUNDLE_REDIS_URL; `what` names the feature that needs it. */
export function redisUrl(flag: string | undefined, what: string): string {
  const url = flag ?? process.env.BUNDLE_REDIS_URL
  if (!url)
    throw new BundleError(
      'E_CLI_USAGE',
      `${what} needs Redis: pass --redis redis://HOST:6379 (or set BUNDLE_REDIS_URL)`,
    )
  return url
}
