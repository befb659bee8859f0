import { existsSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import type { ResolvedConfig } from '../builder/index.js'
import type { ServiceDefinition } from '../framework/index.js'
import type { ModelInfo } from '../store/index.js'
import { ensembleChecker } from './ensemble-check.js'
import { loadService } from './load-service.js'
import { withEnsembles } from './serve-bundle.js'

/** A project directory: bundle.yaml, not yet built (a built bundle directory holds bundle.json). */
export const isProjectDir = (dir: string): boolean =>
  existsSync(dir) &&
  statSync(dir).isDirectory() &&
  existsSync(join(dir, 'bundle.yaml')) &&
  !existsSync(join(dir, 'bundle.json'))

/**
 * The bundle.yaml that governs a service file: the nearest one in its directory or above (up to
 * the project root, the first directory holding package.json), if its `service:` is that file.
 */
export async function projectConfigFor(
  file: string,
  className: string | undefined,
): Promise<ResolvedConfig | undefined> {
  const { readBundleConfig } = await import('../builder/index.js')
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'bundle.yaml'))) {
      const cfg = await readBundleConfig(dir)
      const [path, cls] = cfg.service.split(':') as [string, string | undefined]
      return resolve(cfg.dir, path) === file && (className === undefined || cls === undefined || cls === className)
        ? cfg
        : undefined
    }
    if (existsSync(join(dir, 'package.json')) || dirname(dir) === dir) return undefined
  }
}

/**
 * Serves a project from its sources the way its bundle would run: bundle.yaml's `env`, its
 * `models:` pins (a model missing from the store is imported from its `source:` first, as
 * `bundle build` does) and its `ensembles`, checked as at build.
 */
export async function loadProject(cfg: ResolvedConfig, entry?: string): Promise<ServiceDefinition> {
  const { checkEnsembles, listedModels, modelForRunner } = await import('../builder/index.js')
  const { ModelStore } = await import('../store/index.js')
  // Environment from bundle.yaml; what the operator set wins.
  for (const [k, v] of Object.entries(cfg.env ?? {})) process.env[k] ??= v
  const [path, cls] = cfg.service.split(':') as [string, string | undefined]
  const definition = await loadService(entry ?? `${resolve(cfg.dir, path)}${cls ? `:${cls}` : ''}`)
  const store = ModelStore.open()
  try {
    const listed = await listedModels(store, cfg)
    const served = new Map<string, ModelInfo>()
    for (const runner of definition.runners) {
      const versions = runner.versions
      if (versions === undefined) continue
      const tag = versions.tag
      const pinned = modelForRunner(cfg, listed, { name: runner.name, tag })?.model
      if (pinned) versions.pin(pinned.tag, pinned.digest)
      const model = pinned ?? stored(store, tag)
      if (model) served.set(runner.name, model)
    }
    const runners = definition.runners.map((r) => ({ name: r.name, kind: r.kind }))
    checkEnsembles(cfg, runners, (r) => served.get(r), await ensembleChecker())
  } finally {
    store.close()
  }
  return withEnsembles(definition, cfg.ensembles)
}

/** A runner's model as its tag resolves now; undefined when a start-up hook has yet to bring it. */
function stored(store: { get(tag: string): ModelInfo }, tag: string): ModelInfo | undefined {
  try {
    return store.get(tag)
  } catch {
    return undefined
  }
}
