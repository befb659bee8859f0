import { spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BundleError } from '../errors/index.js'
import {
  BUNDLE_SIG,
  type BundleInfo,
  loadTrustedKey,
  ModelStore,
  putSignature,
  signatureHint,
  storedBundleSignature,
  storedSignature,
  verifyBundle,
} from '../store/index.js'
import type { BundleManifest } from './manifest.js'
import { buildStep, ensureBaseImage, imageSize, pullFailure, runEngine, type Backend } from './engine.js'
import { sizeOf, TYPESCRIPT_MODULE } from './prune.js'
import { baseImageOf, needsNode, renderDockerfile } from './templates.js'
import { SBOM_FILE, SBOM_LABEL } from './sbom-file.js'
import { vendorDependencies, type VendorStats } from './vendor.js'

export type { Backend }
export const BACKENDS: readonly Backend[] = ['docker', 'podman', 'buildah']

export interface ContainerizeOptions {
  store: ModelStore
  tag: string
  /** Image reference (default `<name>:<version>`). */
  image?: string
  backend?: Backend
  baseImage?: string
  /**
   * Where the bundle's npm dependencies are installed (default: the current directory, then
   * modelbundle's own install).
   */
  from?: string[]
  /** Progress lines go here (default: stderr). */
  log?: (line: string) => void
  /** Pass every line of the engine's output to `log`, not only its build steps. */
  verbose?: boolean
  /**
   * Public key files (PEM) the image trusts: they go into the image and its server verifies the
   * bundle, and every model before it loads, against them (BUNDLE_TRUST). The bundle and its models
   * must verify here first: an image that would refuse to start is not built.
   */
  trust?: string[]
}

export interface ContainerizeResult {
  image: string
  bundle: BundleInfo
  backend: Backend
  /** The image's size as the engine reports it (uncompressed layers), when it says. */
  size?: number
  /** The base image's size, when the engine says. */
  baseSize?: number
  /** What went into /app/node_modules and what stayed out. */
  nodeModules: VendorStats
}

const works = (cmd: string, args: string[]): boolean =>
  spawnSync(cmd, args, { stdio: 'ignore', timeout: 15_000 }).status === 0

/** The engine to build with: the one asked for, else a running docker daemon, else podman, else buildah. */
export function pickBackend(asked?: Backend): Backend {
  if (asked !== undefined) {
    if (!works(asked, ['--version']))
      throw new BundleError('E_CONTAINER_BACKEND', `${asked} is not installed or not on PATH`)
    return asked
  }
  if (works('docker', ['info'])) return 'docker'
  if (works('podman', ['--version'])) return 'podman'
  if (works('buildah', ['--version'])) return 'buildah'
  throw new BundleError(
    'E_CONTAINER_BACKEND',
    'no container engine found: install podman (no daemon needed; see docs/bundles.md "Containers"), or start docker',
  )
}

/** The Dockerfile `containerize` builds with, for --print-dockerfile. */
export function dockerfileFor(bundle: BundleInfo, baseImage?: string, trustKeys = 0): string {
  return renderDockerfile(bundle.manifest as BundleManifest, baseImage, trustKeys)
}

/** 1.2 MB / 340.5 kB: decimal units, as the engines print image sizes. */
export const mb = (bytes: number): string =>
  bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(1)} kB`

/** TypeScript files a bundle carries (a custom runner's module under `include`): tsx must come along. */
function typescriptModules(dir: string): string[] {
  const found: string[] = []
  const walk = (d: string, rel: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.name === 'node_modules') continue
      if (e.isDirectory()) walk(join(d, e.name), `${rel}${e.name}/`)
      else if (TYPESCRIPT_MODULE.test(e.name)) found.push(rel + e.name)
    }
  }
  walk(dir, '')
  return found
}

/**
 * `bundle containerize`: assembles a build context — the bundle, its npm dependencies copied
 * from this machine's install at the pinned versions (only what runs: prune.ts), and a model
 * store holding exactly the pinned models — and builds an image with docker, podman or buildah.
 * The build needs no registry access beyond the base image (none with a local base, see
 * docker/local-base-image.sh); a base that cannot be pulled fails first, with
 * E_CONTAINER_BASE_IMAGE. Progress (steps, bytes, final size) goes to `log`.
 */
export async function containerize(o: ContainerizeOptions): Promise<ContainerizeResult> {
  const { bundle, dir } = await o.store.bundles.paths(o.tag)
  const manifest = bundle.manifest as BundleManifest
  const backend = pickBackend(o.backend)
  const image = o.image ?? `${bundle.name}:${bundle.version}`
  const log = o.log ?? ((line: string) => void process.stderr.write(`${line}\n`))
  // Verified before anything is pulled or built: a bundle the keys did not sign fails first.
  const trusted = o.trust?.length ? await verifiedForImage(o.store, bundle.tag, o.trust, log) : undefined
  const base = baseImageOf(manifest, o.baseImage)
  const status = await ensureBaseImage(backend, base, manifest.node, log)
  const baseSize = base === 'scratch' ? 0 : imageSize(backend, base)
  log(`base image ${base}: ${status}${baseSize !== undefined ? `, ${mb(baseSize)}` : ''}`)
  const ctx = o.store.makeTempDir('image')
  try {
    cpSync(dir, join(ctx, 'bundle'), { recursive: true, dereference: true })
    // A signed bundle carries its signature (bundle.sig) into the image; its models' go into the image's store.
    const bundleSig = storedBundleSignature(o.store, bundle.tag)
    if (bundleSig !== undefined) writeFileSync(join(ctx, 'bundle', BUNDLE_SIG), bundleSig)
    if (trusted) {
      mkdirSync(join(ctx, 'trust'))
      // Readable by the image's non-root user, whatever mode the key file had here.
      for (const [i, file] of trusted.entries())
        writeFileSync(join(ctx, 'trust', `${i}.pem`), readFileSync(file), { mode: 0o644 })
    }
    const code = sizeOf(join(ctx, 'bundle'))
    log(`[1/4] bundle ${bundle.tag}: ${code.files} files, ${mb(code.bytes)}`)
    const ts = typescriptModules(join(ctx, 'bundle'))
    const bases = o.from ?? [process.cwd(), new URL('../..', import.meta.url).pathname]
    let nodeModules: VendorStats | undefined
    let lastError: unknown
    for (const from of bases) {
      try {
        rmSync(join(ctx, 'node_modules'), { recursive: true, force: true })
        nodeModules = vendorDependencies(manifest.dependencies, manifest.packages, from, ctx, {
          typescript: ts.length > 0,
        })
        break
      } catch (err) {
        lastError = err
      }
    }
    if (nodeModules === undefined) throw lastError
    const pruned = Object.entries(nodeModules.pruned).sort((a, b) => b[1].bytes - a[1].bytes)
    const prunedBytes = pruned.reduce((n, [, p]) => n + p.bytes, 0)
    log(
      `[2/4] node_modules: ${nodeModules.packages} packages, ${nodeModules.files} files, ${mb(nodeModules.bytes)}` +
        (nodeModules.leftOutPackages.length
          ? `; build-only, left out: ${nodeModules.leftOutPackages.join(', ')}`
          : ts.length
            ? `; tsx kept for ${ts.slice(0, 3).join(', ')}`
            : '') +
        (pruned.length
          ? `; not needed at run time, left out: ${mb(prunedBytes)} ` +
            `(${pruned.map(([why, p]) => `${why} ${mb(p.bytes)}`).join(', ')})`
          : ''),
    )
    await copyModels(o.store, bundle, join(ctx, 'models'))
    rmSync(join(ctx, 'models', 'tmp'), { recursive: true, force: true })
    log(
      `[3/4] models: ${bundle.models.length} (${bundle.models.map((m) => m.tag).join(', ') || 'none'}), ` +
        `${mb(sizeOf(join(ctx, 'models')).bytes)}`,
    )
    if (needsNode(manifest, o.baseImage)) copyFileSync(process.execPath, join(ctx, 'node'))
    writeFileSync(join(ctx, 'Dockerfile'), renderDockerfile(manifest, o.baseImage, trusted?.length ?? 0))
    const labels = {
      'modelbundle.bundle': bundle.tag,
      'modelbundle.digest': bundle.digest,
      'org.opencontainers.image.title': bundle.name,
      'org.opencontainers.image.version': bundle.version,
      // Where the image's SBOM is (a bundle built before SBOMs has none).
      ...(bundle.files.some((f) => f.path === SBOM_FILE) ? { [SBOM_LABEL]: `/app/${SBOM_FILE}` } : {}),
    }
    const labelArgs = Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`])
    // docker format keeps HEALTHCHECK (the OCI image format has no health checks).
    const args =
      backend === 'buildah'
        ? ['bud', '--format', 'docker', '-t', image, ...labelArgs, ctx]
        : backend === 'podman'
          ? ['build', '--format', 'docker', '-t', image, ...labelArgs, ctx]
          : ['build', '-t', image, ...labelArgs, ctx]
    log(`[4/4] ${backend} ${args[0]} ${image}`)
    await runEngine(
      backend,
      args,
      (line) => {
        const step = o.verbose ? line : buildStep(line)
        if (step !== undefined) log(`  ${step}`)
      },
      pullFailure(base, manifest.node),
    )
    const size = imageSize(backend, image)
    const over = size !== undefined && baseSize !== undefined ? `, ${mb(size - baseSize)} over the base` : ''
    log(`built ${image} with ${backend}${size !== undefined ? `: ${mb(size)}${over}` : ''}`)
    return {
      image,
      bundle,
      backend,
      ...(size !== undefined ? { size } : {}),
      ...(baseSize !== undefined ? { baseSize } : {}),
      nodeModules,
    }
  } finally {
    rmSync(ctx, { recursive: true, force: true })
  }
}

/**
 * `containerize --trust`: the bundle and its models must verify against the keys here, before an
 * image is built that would refuse to start; answers the key files to copy into the image.
 */
async function verifiedForImage(
  store: ModelStore,
  tag: string,
  keys: readonly string[],
  log: (line: string) => void,
): Promise<string[]> {
  const trusted = keys.map(loadTrustedKey)
  const v = await verifyBundle(store, tag, trusted)
  log(`verified bundle ${tag} and its ${v.models.length} models against ${keys.join(', ')}`)
  return [...keys]
}

/** The image's model store: exactly the pinned models (checked against their pins), with their signatures. */
async function copyModels(store: ModelStore, bundle: BundleInfo, home: string): Promise<void> {
  const models = ModelStore.open({ home })
  try {
    for (const ref of bundle.models) {
      const { model, dir: files } = await store.paths(ref.tag)
      // The checkout may hold a model.sig laid out for another model of the same content: the
      // signature comes from the store's index below, never from the directory.
      const copy = await models.save(
        {
          name: model.name,
          version: model.version,
          paths: [files],
          framework: model.framework,
          labels: model.labels,
          metadata: model.metadata,
        },
        { adoptSignature: false },
      )
      if (copy.digest !== ref.digest)
        throw new BundleError(
          'E_BUNDLE_MODEL_MISMATCH',
          `model ${ref.tag} in the store (${model.digest}) is not the one the bundle pins (${ref.digest})`,
        )
      const sig = storedSignature(store, model)
      if (sig !== undefined) putSignature(models, copy.tag, sig, signatureHint(sig))
    }
  } finally {
    models.close()
  }
}
