import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { BundleError } from '../errors/index.js'
import type { ServiceDefinition } from '../framework/index.js'
import { loadService, parseEntry } from './load-service.js'
import { isBundleDir, loadBundle } from './serve-bundle.js'

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
  const digest = createHash('sha256').update(readFileSync(join(dir, 'bundle.json'))).update(readFileSync(join(dir, manifest.service.entry))).digest('hex')
  return { definition, scope: `${manifest.name}-${digest.slice(0, 12)}` }
}

/** A service source file, a bundle directory, or a stored bundle's tag — in that order. */
export async function resolveEntry(entry: string): Promise<Entry> {
  if (isBundleDir(entry)) return fromBundleDir(resolve(entry))
  let source: string | undefined
  try {
    source = parseEntry(entry).file
  } catch {
    // not a file entry: maybe a tag
  }
  // Something that looks like a source file is one (a missing file says so); anything else is a tag.
  if (source !== undefined) {
    const definition = await loadService(entry)
    return { definition, scope: definition.name }
  }
  const { ModelStore, parseTag } = await import('../store/index.js')
  try {
    parseTag(entry)
  } catch {
    throw new BundleError('E_SERVICE_LOAD', `"${entry}" is neither a service file (path/to/service.ts[:ClassName]), a bundle directory, nor a bundle tag`)
  }
  const store = ModelStore.open()
  try {
    const { dir } = await store.bundles.paths(entry)
    return await fromBundleDir(dir)
  } finally {
    store.close()
  }
}

/** The Redis URL from --redis or BUNDLE_REDIS_URL; `what` names the feature that needs it. */
export function redisUrl(flag: string | undefined, what: string): string {
  const url = flag ?? process.env.BUNDLE_REDIS_URL
  if (!url) throw new BundleError('E_CLI_USAGE', `${what} needs Redis: pass --redis redis://HOST:6379 (or set BUNDLE_REDIS_URL)`)
  return url
}
