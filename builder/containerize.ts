import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BundleError } from '../errors/index.js'
import { ModelStore, type BundleInfo } from '../store/index.js'
import type { BundleManifest } from './manifest.js'
import { needsNode, renderDockerfile } from './templates.js'
import { vendorDependencies } from './vendor.js'

export type Backend = 'docker' | 'podman' | 'buildah'
export const BACKENDS: readonly Backend[] = ['docker', 'podman', 'buildah']

export interface ContainerizeOptions {
  store: ModelStore
  tag: string
  /** Image reference (default `<name>:<version>`). */
  image?: string
  backend?: Backend
  baseImage?: string
  /** Where the bundle's npm dependencies are installed (default: the current directory, then modelbundle's own install). */
  from?: string[]
  /** Engine output goes here (default: stderr). */
  log?: (line: string) => void
}

const works = (cmd: string, args: string[]): boolean => spawnSync(cmd, args, { stdio: 'ignore', timeout: 15_000 }).status === 0

/** The engine to build with: the one asked for, else a running docker daemon, else podman, else buildah. */
export function pickBackend(asked?: Backend): Backend {
  if (asked !== undefined) {
    if (!works(asked, ['--version'])) throw new BundleError('E_CONTAINER_BACKEND', `${asked} is not installed or not on PATH`)
    return asked
  }
  if (works('docker', ['info'])) return 'docker'
  if (works('podman', ['--version'])) return 'podman'
  if (works('buildah', ['--version'])) return 'buildah'
  throw new BundleError('E_CONTAINER_BACKEND', 'no container engine found: install podman (no daemon needed; see README "Containers"), or start docker')
}

/** The Dockerfile `containerize` builds with, for --print-dockerfile. */
export function dockerfileFor(bundle: BundleInfo, baseImage?: string): string {
  return renderDockerfile(bundle.manifest as BundleManifest, baseImage)
}

/**
 * `bundle containerize`: assembles a build context — the bundle, its npm dependencies copied
 * from this machine's install at the pinned versions, and a model store holding exactly the
 * pinned models — and builds an image with docker, podman or buildah. The build needs no
 * registry access beyond the base image (none with a local base, see docker/local-base-image.sh).
 */
export async function containerize(o: ContainerizeOptions): Promise<{ image: string; bundle: BundleInfo; backend: Backend }> {
  const { bundle, dir } = await o.store.bundles.paths(o.tag)
  const manifest = bundle.manifest as BundleManifest
  const backend = pickBackend(o.backend)
  const image = o.image ?? `${bundle.name}:${bundle.version}`
  const log = o.log ?? ((line: string) => process.stderr.write(line))
  const ctx = o.store.makeTempDir('image')
  try {
    cpSync(dir, join(ctx, 'bundle'), { recursive: true, dereference: true })
    const bases = o.from ?? [process.cwd(), new URL('../..', import.meta.url).pathname]
    let vendored = false
    let lastError: unknown
    for (const base of bases) {
      try {
        rmSync(join(ctx, 'node_modules'), { recursive: true, force: true })
        vendorDependencies(manifest.dependencies, manifest.packages, base, ctx)
        vendored = true
        break
      } catch (err) {
        lastError = err
      }
    }
    if (!vendored) throw lastError
    const models = ModelStore.open({ home: join(ctx, 'models') })
    try {
      for (const ref of bundle.models) {
        const { model, dir: files } = await o.store.paths(ref.tag)
        const copy = await models.save({ name: model.name, version: model.version, paths: [files], framework: model.framework, labels: model.labels, metadata: model.metadata })
        if (copy.digest !== ref.digest) throw new BundleError('E_BUNDLE_MODEL_MISMATCH', `model ${ref.tag} in the store (${model.digest}) is not the one the bundle pins (${ref.digest})`)
      }
    } finally {
      models.close()
    }
    rmSync(join(ctx, 'models', 'tmp'), { recursive: true, force: true })
    if (needsNode(manifest, o.baseImage)) copyFileSync(process.execPath, join(ctx, 'node'))
    writeFileSync(join(ctx, 'Dockerfile'), renderDockerfile(manifest, o.baseImage))
    const labels = { 'modelbundle.bundle': bundle.tag, 'modelbundle.digest': bundle.digest, 'org.opencontainers.image.title': bundle.name, 'org.opencontainers.image.version': bundle.version }
    const labelArgs = Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`])
    // docker format keeps HEALTHCHECK (the OCI image format has no health checks).
    const args = backend === 'buildah' ? ['bud', '--format', 'docker', '-t', image, ...labelArgs, ctx] : backend === 'podman' ? ['build', '--format', 'docker', '-t', image, ...labelArgs, ctx] : ['build', '-t', image, ...labelArgs, ctx]
    await run(backend, args, log)
    return { image, bundle, backend }
  } finally {
    rmSync(ctx, { recursive: true, force: true })
  }
}

function run(cmd: string, args: string[], log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let tail = ''
    const take = (c: Buffer) => {
      const s = c.toString()
      tail = (tail + s).slice(-2000)
      log(s)
    }
    child.stdout.on('data', take)
    child.stderr.on('data', take)
    child.on('error', (err) => reject(new BundleError('E_CONTAINER_BACKEND', `${cmd} could not start: ${err.message}`)))
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new BundleError('E_CONTAINER_BACKEND', `${cmd} ${args[0]} failed (exit ${code}): ${tail.trim().split('\n').slice(-3).join(' | ')}`))))
  })
}
