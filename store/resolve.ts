import semver from 'semver'
import { BundleError } from '../errors/index.js'
import type { ErrorCode } from '../errors/index.js'
import type { ModelIndex, StoredModel } from './model-index.js'
import { MODEL_NAMES, type NameRule, parseTag } from './tag.js'

const MAX_LISTED = 10

/** What tag resolution needs of an index: models and bundles both have one. */
export interface TagIndex<T> {
  latest(name: string): T | undefined
  exact(name: string, version: string): T | undefined
  prefixed(name: string, prefix: string): { id: number; version: string }[]
  versions(name: string): { id: number; version: string }[]
  byId(id: number): T | undefined
}

export interface Kind {
  noun: 'model' | 'bundle'
  notFound: ErrorCode
  names: NameRule
}

export const MODEL: Kind = { noun: 'model', notFound: 'E_STORE_MODEL_NOT_FOUND', names: MODEL_NAMES }

/**
 * Resolves a tag to one stored model:
 * - `name`, `name:latest` → newest by creation time;
 * - `name:v` → exact version v, else the one version starting with v (ambiguity is an error);
 * - `name@range` → highest semver version satisfying the range.
 */
export function resolveTag(index: ModelIndex, tag: string): StoredModel {
  return resolveIn(index, tag, MODEL)
}

/** resolveTag over any index (bundles use it), with that kind's noun and not-found code. */
export function resolveIn<T>(index: TagIndex<T>, tag: string, kind: Kind): T {
  const q = parseTag(tag, kind.names)
  if (q.kind === 'latest') {
    const m = index.latest(q.name)
    if (m === undefined) throw new BundleError(kind.notFound, `no ${kind.noun} named "${q.name}" is stored`)
    return m
  }
  if (q.kind === 'version') {
    const exact = index.exact(q.name, q.version)
    if (exact !== undefined) return exact
    const candidates = index.prefixed(q.name, q.version)
    if (candidates.length === 1) return index.byId(candidates[0]!.id)!
    if (candidates.length === 0) {
      if (index.latest(q.name) === undefined)
        throw new BundleError(kind.notFound, `${tag}: no ${kind.noun} named "${q.name}" is stored`)
      const versions = index.versions(q.name).map((v) => v.version)
      const have = versions.every((v) => semver.valid(v) !== null) ? semver.rsort(versions) : versions.sort().reverse()
      const shown = have.slice(0, MAX_LISTED).join(', ') + (have.length > MAX_LISTED ? ', …' : '')
      throw new BundleError(
        kind.notFound,
        `${kind.noun} ${q.name}:${q.version} is not stored (stored versions of "${q.name}": ${shown})`,
      )
    }
    const shown = candidates.slice(0, MAX_LISTED).map((c) => `${q.name}:${c.version}`)
    const more = candidates.length > MAX_LISTED ? ` and more` : ''
    throw new BundleError(
      'E_STORE_TAG_AMBIGUOUS',
      `${tag} matches ${candidates.length > 20 ? 'over 20' : candidates.length} versions: ${shown.join(', ')}${more}`,
      { details: { candidates: shown } },
    )
  }
  const semverVersions = index.versions(q.name).filter((v) => semver.valid(v.version) !== null)
  const best = semver.maxSatisfying(
    semverVersions.map((v) => v.version),
    q.range,
  )
  if (best === null) {
    const have = semverVersions
      .map((v) => v.version)
      .sort(semver.rcompare)
      .slice(0, MAX_LISTED)
    const hint = have.length ? `stored semver versions: ${have.join(', ')}` : `"${q.name}" has no semver versions`
    throw new BundleError(kind.notFound, `no version of "${q.name}" satisfies ${q.range} (${hint})`)
  }
  const id = semverVersions.find((v) => v.version === best)!.id
  return index.byId(id)!
}

/**
 * The rows `tags` name, each once, for a delete; with `allVersions` a tag names every version of
 * its name. Throws on the first tag that names nothing, so that nothing is deleted.
 */
export function resolveMany<T extends { id: number }>(
  index: TagIndex<T>,
  tags: readonly string[],
  kind: Kind,
  allVersions = false,
): T[] {
  const targets = new Map<number, T>()
  for (const tag of tags) {
    if (allVersions) {
      const q = parseTag(tag, kind.names)
      const all = index.versions(q.name)
      if (all.length === 0) throw new BundleError(kind.notFound, `no ${kind.noun} named "${q.name}" is stored`)
      for (const v of all) targets.set(v.id, index.byId(v.id)!)
    } else {
      const m = resolveIn(index, tag, kind)
      targets.set(m.id, m)
    }
  }
  return [...targets.values()]
}
