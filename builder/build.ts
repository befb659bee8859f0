import { copyFileSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { BundleError, isBundleError } from '../errors/index.js'
import { parseTag, type BundleInfo, type Labels, type ModelInfo, type ModelStore } from '../store/index.js'
import { compileService } from './compile.js'
import { readBundleConfig, type EnsembleSpec, type ModelRequest, type ResolvedConfig } from './config.js'
import { findPackage, lockfileFor, packageOf, pinDependencies } from './deps.js'
import { collectFiles } from './files.js'
import { DEFAULT_BASE_IMAGE, DEFAULT_GPU_BASE_IMAGE, MANIFEST_FILE, type BundleManifest } from './manifest.js'
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
  /** Checks an ensemble's wiring (one producer per tensor, no cycles); throws what is wrong. */
  checkEnsemble?: (name: string, spec: EnsembleSpec) => void
}

/** bundle.yaml's ensembles: steps name the service's onnx runners; names are the ensembles' own. */
function checkEnsembles(cfg: ResolvedConfig, info: ServiceInfo, check: BuildOptions['checkEnsemble']): void {
  const models = info.runners.filter((r) => r.kind === 'onnx').map((r) => r.name)
  for (const [name, spec] of Object.entries(cfg.ensembles ?? {})) {
    const where = `${cfg.file}: ensembles.${name}`
    if (info.runners.some((r) => r.name === name)) throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${where}: the service already has a runner named "${name}"`)
    spec.steps.forEach((s, i) => {
      if (!models.includes(s.model)) throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${where}.steps.${i}.model: "${s.model}" is not an onnx runner of the service (runners: ${models.join(', ') || 'none'})`)
    })
    try {
      check?.(name, spec)
    } catch (err) {
      throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${where}: ${(err as Error).message}`)
    }
  }
}

/**
 * `bundle build`: pins models, compiles the service, collects its files and stores the result.
 * Work happens in a temp directory inside the store; nothing is visible until the bundle row
 * commits, and a failure leaves the store as it was (models imported from `source:` stay).
 */
export async function buildBundle(o: BuildOptions): Promise<{ bundle: BundleInfo; status: 'created' | 'unchanged' }> {
  const cfg = await readBundleConfig(resolve(o.dir), o.file)
  const [servicePath, className] = cfg.service.split(':') as [string, string | undefined]
  const entryFile = resolve(cfg.dir, servicePath)
  if (!existsSync(entryFile)) throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${cfg.file}: service: ${entryFile} does not exist`)

  const requested = new Map<string, ModelInfo>()
  for (const m of cfg.models) requested.set(m.tag, await ensureModel(o.store, cfg, m))
  const info = await o.loadService(className ? `${entryFile}:${className}` : entryFile)
  checkEnsembles(cfg, info, o.checkEnsemble)

  // Every model is pinned to an exact version and digest; runner tags like name:latest included.
  const pinned = new Map<string, BundleManifest['models'][number]>()
  const pin = (model: ModelInfo, asked: string | undefined, alias?: string) => {
    const ref = pinned.get(model.tag) ?? { tag: model.tag, digest: model.digest }
    if (alias) ref.alias = alias
    if (asked && asked !== model.tag) ref.requested = [...new Set([...(ref.requested ?? []), asked])].sort()
    pinned.set(model.tag, ref)
  }
  for (const m of cfg.models) pin(requested.get(m.tag)!, undefined, m.alias)
  const aliases = new Map(cfg.models.filter((m) => m.alias).map((m) => [m.alias!, requested.get(m.tag)!]))
  for (const r of info.runners) {
    if (r.tag === undefined) continue
    const aliased = aliases.get(r.tag)
    if (aliased) {
      pin(aliased, r.tag)
      continue
    }
    let model: ModelInfo
    try {
      model = o.store.get(r.tag)
    } catch (err) {
      if (isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND') {
        throw new BundleError('E_STORE_MODEL_NOT_FOUND', `runner ${r.name} needs model ${r.tag}, which is not in the store at ${o.store.home}; save it with \`bundle models save\`, or list it in ${cfg.file} under models: with a source:`)
      }
      throw err
    }
    pin(model, r.tag)
  }

  const staging = o.store.makeTempDir('build')
  try {
    const app = join(staging, 'app')
    const compiled = await compileService(cfg.dir, entryFile, app)
    // bundle.yaml is build input, and a model store inside the directory is not the service's.
    const inside = (p: string) => {
      const rel = relative(cfg.dir, p).split(sep).join('/')
      return rel.startsWith('..') || rel === '' ? [] : [rel]
    }
    for (const rel of collectFiles(cfg.dir, cfg.include, [...(cfg.exclude ?? []), ...inside(cfg.file), ...inside(o.store.home)])) {
      const dest = join(app, rel)
      if (existsSync(dest)) continue // the compiled entry wins over a same-named file
      mkdirSync(dirname(dest), { recursive: true })
      copyFileSync(join(cfg.dir, rel), dest)
    }
    const deps = pinDependencies(compiled.packages, cfg.dir)
    const manifest: BundleManifest = {
      schema: 1,
      name: cfg.name ?? info.name,
      ...(cfg.description ?? info.description ? { description: cfg.description ?? info.description } : {}),
      service: { entry: `app/${compiled.entry}`, export: info.exportName },
      apis: info.apis,
      runners: info.runners,
      models: [...pinned.values()].sort((a, b) => (a.tag < b.tag ? -1 : 1)),
      env: cfg.env ?? {},
      ...(cfg.ensembles && Object.keys(cfg.ensembles).length ? { ensembles: cfg.ensembles } : {}),
      docker: {
        baseImage: cfg.docker?.baseImage ?? DEFAULT_BASE_IMAGE,
        systemPackages: cfg.docker?.systemPackages ?? [],
        gpu: cfg.docker?.gpu === true ? { baseImage: DEFAULT_GPU_BASE_IMAGE } : (cfg.docker?.gpu || false),
        user: cfg.docker?.user ?? 'bundle',
      },
      dependencies: deps.direct,
      packages: deps.closure.map((p) => `${p.name}@${p.version}`),
      node: process.versions.node.split('.')[0]!,
    }
    const json = (v: unknown) => JSON.stringify(v, null, 2) + '\n'
    writeFileSync(join(staging, MANIFEST_FILE), json(manifest))
    writeFileSync(join(staging, 'openapi.json'), json(info.openapi))
    writeFileSync(join(staging, 'README.md'), renderReadme(manifest))
    writeFileSync(join(staging, 'Dockerfile'), renderDockerfile(manifest))
    // For a production install of the bundle on its own (`npm install` in the bundle directory).
    writeFileSync(join(staging, 'package.json'), json({ name: manifest.name, private: true, type: 'module', dependencies: deps.direct }))
    // With the project's lock entries, `npm ci` in the bundle directory installs exactly these versions.
    const lock = lockfileFor(manifest.name, deps.direct, deps.closure, cfg.dir)
    if (lock) writeFileSync(join(staging, 'package-lock.json'), json(lock))
    return await o.store.bundles.save({ name: manifest.name, ...(o.version ? { version: o.version } : {}), labels: { ...cfg.labels, ...o.labels }, dir: staging, manifest })
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

/** The model a bundle.yaml entry names: from the store, or imported from its `source:` first. */
async function ensureModel(store: ModelStore, cfg: ResolvedConfig, m: ModelRequest): Promise<ModelInfo> {
  try {
    return store.get(m.tag)
  } catch (err) {
    if (!(isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND')) throw err
  }
  const q = parseTag(m.tag)
  if (m.source === undefined) {
    throw new BundleError('E_STORE_MODEL_NOT_FOUND', `${cfg.file}: model ${m.tag} is not in the store at ${store.home}; run \`bundle models save ${q.name} PATH${q.kind === 'version' ? ` --version ${q.version}` : ''}\` (or \`bundle models import FILE\`), or give it a source: in ${cfg.file}`)
  }
  if (q.kind !== 'version') throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${cfg.file}: models: ${m.tag} has a source, so its tag must be an exact name:version to save it under`)
  const path = sourcePath(cfg.dir, m.source)
  if (path === undefined || !existsSync(path) || !statSync(path).isFile()) throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${cfg.file}: models: source ${m.source} of ${m.tag} is neither a file next to bundle.yaml nor a file of an installed npm package`)
  return store.save({ name: q.name, version: q.version, paths: [path], labels: { source: m.source.startsWith('.') || isAbsolute(m.source) ? 'file' : 'npm' } })
}

/** `./models/x.onnx` (next to bundle.yaml) or `@scope/pkg/path/in/package` (an installed package). */
function sourcePath(dir: string, source: string): string | undefined {
  if (source.startsWith('.') || isAbsolute(source)) return resolve(dir, source)
  const pkg = packageOf(source)
  if (pkg === undefined) return undefined
  const found = findPackage(pkg, dir)
  return found ? join(found.dir, source.slice(pkg.length + 1)) : undefined
}
