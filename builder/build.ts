import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { BundleError, isBundleError } from '../errors/index.js'
import { saveCommand, type BundleInfo, type Labels, type ModelInfo, type ModelStore } from '../store/index.js'
import { compileService } from './compile.js'
import { readBundleConfig, type ResolvedConfig } from './config.js'
import { lockfileFor, pinDependencies } from './deps.js'
import { checkEnsembles, type EnsembleChecker } from './ensembles.js'
import { collectFiles } from './files.js'
import { SBOM_FILE } from './sbom-file.js'
import { DEFAULT_BASE_IMAGE, DEFAULT_GPU_BASE_IMAGE, MANIFEST_FILE, type BundleManifest } from './manifest.js'
import { listedModels, modelForRunner } from './pins.js'
import { renderDockerfile, renderReadme } from './templates.js'

/** What the builder needs to know of a service, as plain data (the builder never imports the framework). */
export interface ServiceInfo {
  name: string
  description?: string
  /** The export that holds the service. */
  exportName: string
  apis: { name: string; route: string; input: string; output: string }[]
  runners: { name: string; kind: string; tag?: string }[]
  openapi: Record<string, unknown>
}

export interface BuildOptions {
  /** The directory holding bundle.yaml (default: the current directory). */
  dir: string
  /** Another bundle file than DIR/bundle.yaml. */
  file?: string
  version?: string
  labels?: Labels
  store: ModelStore
  /** Loads the service from its sources (`path/to/service.ts[:Class]`, absolute). */
  loadService: (entry: string) => Promise<ServiceInfo>
  /** Checks an ensemble's wiring and its fit to the pinned models' signatures; throws what is wrong. */
  checkEnsemble?: EnsembleChecker
}

/** One file of the bundle's code, as `bundle build` lists it. */
export interface PackagedFile {
  /** Relative to the bundle root: `app/service.js`, `app/assets/x.png`. */
  path: string
  size: number
}

/** What a build packages, pins and leaves out (printed by `bundle build`; all `--dry-run` does). */
export interface BuildReport {
  name: string
  /** The compiled entry and every file copied from the directory, sorted. */
  files: PackagedFile[]
  /** Files left out because their names look like secrets (include: can name one exactly). */
  secrets: string[]
  /** Symbolic links left out because they point outside the directory. */
  outside: string[]
  /** Every model pinned; `wouldImport`: a dry run found it missing and a build imports it from there. */
  models: (BundleManifest['models'][number] & { wouldImport?: string })[]
}

interface Prepared {
  cfg: ResolvedConfig
  entryFile: string
  info: ServiceInfo
  models: BuildReport['models']
  files: string[]
  secrets: string[]
  outside: string[]
}

/** Everything a build decides before it writes: config, models (imported unless a dry run), pins, checks, files. */
async function prepare(o: BuildOptions, dryRun: boolean): Promise<Prepared> {
  const cfg = await readBundleConfig(resolve(o.dir), o.file)
  const [servicePath, className] = cfg.service.split(':') as [string, string | undefined]
  const entryFile = resolve(cfg.dir, servicePath)
  if (!existsSync(entryFile))
    throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${cfg.file}: service: ${entryFile} does not exist`)

  const listed = await listedModels(o.store, cfg, { dryRun })
  const info = await o.loadService(className ? `${entryFile}:${className}` : entryFile)

  // Every model is pinned to an exact version and digest; runner tags like name:latest included.
  const pinned = new Map<string, BuildReport['models'][number]>()
  const pin = (model: ModelInfo, asked: string | undefined, extra: { alias?: string; wouldImport?: string } = {}) => {
    const ref = pinned.get(model.tag) ?? { tag: model.tag, digest: model.digest }
    if (extra.alias) ref.alias = extra.alias
    if (extra.wouldImport) ref.wouldImport = extra.wouldImport
    if (asked && asked !== model.tag) ref.requested = [...new Set([...(ref.requested ?? []), asked])].sort()
    pinned.set(model.tag, ref)
  }
  for (const l of listed)
    pin(l.model, undefined, {
      ...(l.request.alias ? { alias: l.request.alias } : {}),
      ...(l.wouldImport ? { wouldImport: l.wouldImport } : {}),
    })
  const served = new Map<string, ModelInfo>()
  for (const r of info.runners) {
    if (r.tag === undefined) continue
    const model =
      modelForRunner(cfg, listed, { name: r.name, tag: r.tag })?.model ?? storedModel(o.store, cfg, r.name, r.tag)
    served.set(r.name, model)
    pin(model, r.tag)
  }
  checkEnsembles(cfg, info.runners, (runner) => served.get(runner), o.checkEnsemble)

  // bundle.yaml is build input, and a model store inside the directory is not the service's.
  const inside = (p: string) => {
    const rel = relative(cfg.dir, p).split(sep).join('/')
    return rel.startsWith('..') || rel === '' ? [] : [rel]
  }
  const { files, secrets, outside } = collectFiles(cfg.dir, {
    include: cfg.include,
    exclude: cfg.exclude,
    never: [...inside(cfg.file), ...inside(o.store.home)],
  })
  return {
    cfg,
    entryFile,
    info,
    models: [...pinned.values()].sort((a, b) => (a.tag < b.tag ? -1 : 1)),
    files,
    secrets,
    outside,
  }
}

function storedModel(store: ModelStore, cfg: ResolvedConfig, runner: string, tag: string): ModelInfo {
  try {
    return store.get(tag)
  } catch (err) {
    if (isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND') {
      throw new BundleError(
        'E_STORE_MODEL_NOT_FOUND',
        `runner ${runner} needs model ${tag}, which is not in the store at ${store.home}; add it with: ` +
          `${saveCommand(tag)} (or list it in ${cfg.file} under models: with a source:)`,
      )
    }
    throw err
  }
}

const sizeOf = (root: string, rel: string): PackagedFile => ({ path: rel, size: statSync(join(root, rel)).size })

/**
 * `bundle build --dry-run`: what a build would package, pin and leave out. Writes nothing to the
 * store: a model a build would import from its `source:` is read in a throwaway store instead.
 */
export async function planBundle(o: BuildOptions): Promise<BuildReport> {
  const p = await prepare(o, true)
  const out = mkdtempSync(join(tmpdir(), 'mb-dry-run-'))
  try {
    const compiled = await compileService(p.cfg.dir, p.entryFile, join(out, 'app'))
    const files = [
      sizeOf(out, `app/${compiled.entry}`),
      ...p.files.filter((f) => f !== compiled.entry).map((f) => ({ ...sizeOf(p.cfg.dir, f), path: `app/${f}` })),
    ]
    return {
      name: p.cfg.name ?? p.info.name,
      files: files.sort((a, b) => (a.path < b.path ? -1 : 1)),
      secrets: p.secrets,
      outside: p.outside,
      models: p.models,
    }
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}

/**
 * `bundle build`: pins models, compiles the service, collects its files and stores the result.
 * Work happens in a temp directory inside the store; nothing is visible until the bundle row
 * commits, and a failure leaves the store as it was (models imported from `source:` stay).
 */
export async function buildBundle(
  o: BuildOptions,
): Promise<{ bundle: BundleInfo; status: 'created' | 'unchanged'; report: BuildReport }> {
  const { cfg, entryFile, info, models, files, secrets, outside } = await prepare(o, false)
  const staging = o.store.makeTempDir('build')
  try {
    const app = join(staging, 'app')
    const compiled = await compileService(cfg.dir, entryFile, app)
    for (const rel of files) {
      const dest = join(app, rel)
      if (existsSync(dest)) continue // the compiled entry wins over a same-named file
      mkdirSync(dirname(dest), { recursive: true })
      copyFileSync(join(cfg.dir, rel), dest)
    }
    const packaged = [compiled.entry, ...files.filter((f) => f !== compiled.entry)]
      .map((f) => sizeOf(staging, `app/${f}`))
      .sort((a, b) => (a.path < b.path ? -1 : 1))
    const deps = pinDependencies(compiled.packages, cfg.dir)
    const manifest: BundleManifest = {
      schema: 1,
      name: cfg.name ?? info.name,
      ...((cfg.description ?? info.description) ? { description: cfg.description ?? info.description } : {}),
      service: { entry: `app/${compiled.entry}`, export: info.exportName, name: info.name },
      apis: info.apis,
      runners: info.runners,
      models,
      env: cfg.env ?? {},
      ...(cfg.ensembles && Object.keys(cfg.ensembles).length ? { ensembles: cfg.ensembles } : {}),
      docker: {
        baseImage: cfg.docker?.baseImage ?? DEFAULT_BASE_IMAGE,
        systemPackages: cfg.docker?.systemPackages ?? [],
        gpu: cfg.docker?.gpu === true ? { baseImage: DEFAULT_GPU_BASE_IMAGE } : cfg.docker?.gpu || false,
        user: cfg.docker?.user ?? 'bundle',
      },
      dependencies: deps.direct,
      packages: deps.closure.map((p) => `${p.name}@${p.version}`),
      node: process.versions.node.split('.')[0]!,
    }
    const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`
    writeFileSync(join(staging, MANIFEST_FILE), json(manifest))
    writeFileSync(join(staging, 'openapi.json'), json(info.openapi))
    writeFileSync(join(staging, 'README.md'), renderReadme(manifest))
    writeFileSync(join(staging, 'Dockerfile'), renderDockerfile(manifest))
    // For a production install of the bundle on its own (`npm install` in the bundle directory).
    writeFileSync(
      join(staging, 'package.json'),
      json({ name: manifest.name, private: true, type: 'module', dependencies: deps.direct }),
    )
    // With the project's lock entries, `npm ci` in the bundle directory installs exactly these versions.
    const lock = lockfileFor(manifest.name, deps.direct, deps.closure, cfg.dir)
    if (lock) writeFileSync(join(staging, 'package-lock.json'), json(lock))
    // The SBOM: every package it runs with and every model it pins (CycloneDX 1.6).
    const pinned = models.map((m) => o.store.get(m.tag))
    // Loaded here only: the CycloneDX library is build-only.
    const { renderSbom } = await import('./sbom.js')
    writeFileSync(
      join(staging, SBOM_FILE),
      renderSbom({ name: manifest.name, packages: deps.closure, project: cfg.dir, models: pinned }),
    )
    const saved = await o.store.bundles.save({
      name: manifest.name,
      ...(o.version ? { version: o.version } : {}),
      labels: { ...cfg.labels, ...o.labels },
      dir: staging,
      manifest,
    })
    return { ...saved, report: { name: manifest.name, files: packaged, secrets, outside, models } }
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}
