import type { CacheRow, ModelHolders, Runner, RunnerOverrides, VersionedRunner } from '../../../runners/index.js'

/** A model the repository hosts or hosted, with its versions and state. */
export interface Entry {
  /** The runner unversioned requests go to; a swap replaces its model in place. */
  primary: VersionedRunner
  /** Other versions loaded side by side (load with keep). */
  others: Map<string, VersionedRunner>
  /** One of the service's own runners (it stays the service's after an unload). */
  declared: boolean
  state: 'READY' | 'LOADING' | 'UNLOADING' | 'UNAVAILABLE'
  reason?: string | undefined
  /** The settings of its last load: a plain reload keeps them, as Triton's does. */
  config?: RunnerOverrides | undefined
}

export interface IndexRow {
  name: string
  version: string
  state: string
  reason?: string
  /** Under a memory budget: what the model costs in memory (measured once loaded, else predicted). */
  size_bytes?: number
  /** Under a memory budget: when a request last used it (ISO 8601). */
  last_used?: string
  /** Under a memory budget: loaded explicitly, so never evicted. */
  pinned?: boolean
  /** Remote runners (`bundle worker --models`): the workers that report holding it in memory now. */
  held_by?: string[]
}

/** What the index adds to the loaded rows: this server's model cache, or what its remote workers hold. */
export interface IndexSources {
  cache?: readonly CacheRow[] | undefined
  holders?: (model: string) => ModelHolders | undefined
}

/**
 * The repository index: every stored model version (UNAVAILABLE unless loaded), then what the
 * server hosts over it — loaded versions, failed loads with their reason, models unloaded while
 * idle, ensembles — sorted by name and version.
 */
export function indexRows(
  stored: readonly { name: string; version: string }[],
  entries: ReadonlyMap<string, Entry>,
  ensembles: ReadonlyMap<string, Runner>,
  sources: IndexSources = {},
): IndexRow[] {
  const rows = new Map<string, IndexRow>()
  const cached = new Map((sources.cache ?? []).map((c) => [c.name, c]))
  for (const m of stored) rows.set(`${m.name}:${m.version}`, { name: m.name, version: m.version, state: 'UNAVAILABLE' })
  for (const [name, e] of entries) {
    for (const r of [e.primary, ...e.others.values()]) {
      // A failed first load has no model: its row is the version it asked for.
      const version = r.versions.model?.version ?? r.versions.tag.split(':')[1] ?? ''
      const idle = e.state === 'READY' && !r.health().loaded
      const c = r === e.primary ? cached.get(name) : undefined
      const state = idle ? 'UNAVAILABLE' : r === e.primary ? e.state : 'READY'
      const why = c
        ? 'not loaded (memory budget); loads on the next request'
        : 'unloaded while idle; loads on the next request'
      const reason = idle ? why : r === e.primary ? e.reason : undefined
      if (version === '' && state === 'UNAVAILABLE' && reason === undefined) continue
      rows.set(`${name}:${version}`, {
        name,
        version,
        state,
        ...(reason ? { reason } : {}),
        ...(c && c.bytes !== undefined ? { size_bytes: c.bytes } : {}),
        ...(c?.lastUsedAt !== undefined ? { last_used: new Date(c.lastUsedAt).toISOString() } : {}),
        ...(c?.pinned ? { pinned: true } : {}),
        ...(r === e.primary && sources.holders ? heldBy(sources.holders(name)) : {}),
      })
    }
  }
  for (const [name, e] of ensembles) {
    const ready = e.ready()
    rows.set(`${name}:1`, {
      name,
      version: '1',
      state: ready ? 'READY' : 'UNAVAILABLE',
      ...(ready ? {} : { reason: 'a step model is not ready' }),
    })
  }
  return [...rows.values()].sort((a, b) =>
    a.name === b.name ? (a.version < b.version ? -1 : 1) : a.name < b.name ? -1 : 1,
  )
}

/** A remote model's row: which workers hold it, its size there and its last use (none: held nowhere now). */
function heldBy(h: ModelHolders | undefined): Pick<IndexRow, 'held_by' | 'size_bytes' | 'last_used'> {
  if (h === undefined) return { held_by: [] }
  return {
    held_by: h.workers,
    ...(h.bytes !== undefined ? { size_bytes: h.bytes } : {}),
    ...(h.lastUsedAt !== undefined ? { last_used: new Date(h.lastUsedAt).toISOString() } : {}),
  }
}
