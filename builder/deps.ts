import { existsSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, relative, sep } from 'node:path'
import { BundleError } from '../errors/index.js'

/** An installed npm package: where it is and what it says about itself. */
export interface InstalledPackage {
  name: string
  version: string
  dir: string
  dependencies: Record<string, string>
  optionalDependencies: Record<string, string>
}

const BUILTINS = new Set(builtinModules)

/** `@scope/pkg/sub/path` → `@scope/pkg`; `pkg/sub` → `pkg`; undefined for relative paths and Node built-ins. */
export function packageOf(specifier: string): string | undefined {
  if (
    specifier.startsWith('.') ||
    specifier.startsWith('/') ||
    specifier.startsWith('node:') ||
    specifier.startsWith('file:')
  )
    return undefined
  const parts = specifier.split('/')
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
  return BUILTINS.has(name) ? undefined : name
}

function readPackage(dir: string): InstalledPackage | undefined {
  try {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Partial<InstalledPackage>
    if (typeof pkg.name !== 'string' || typeof pkg.version !== 'string') return undefined
    return {
      name: pkg.name,
      version: pkg.version,
      dir,
      dependencies: pkg.dependencies ?? {},
      optionalDependencies: pkg.optionalDependencies ?? {},
    }
  } catch {
    return undefined
  }
}

/**
 * Finds `name` the way Node resolves a bare import from `from`: node_modules/<name> in `from`
 * and each directory above it — or the enclosing package itself when it is `name`
 * (a package importing itself by name, as this repository's examples import modelbundle).
 */
export function findPackage(name: string, from: string): InstalledPackage | undefined {
  let dir = from
  for (;;) {
    const candidate = readPackage(join(dir, 'node_modules', name))
    if (candidate) return candidate
    const self = existsSync(join(dir, 'package.json')) ? readPackage(dir) : undefined
    if (self?.name === name) return self
    const up = dirname(dir)
    if (up === dir) return undefined
    dir = up
  }
}

/**
 * The exact installed versions of the packages a bundle imports (`direct`), and of everything
 * they need in turn (`closure`, one entry per package directory: two versions of a package
 * can coexist). This is what a production install of the bundle must reproduce. `leaveOut`
 * names dependencies not to follow (an image leaves build-only packages out); the packages
 * asked for directly are always taken.
 */
export function pinDependencies(
  packages: readonly string[],
  from: string,
  leaveOut: (name: string) => boolean = () => false,
): { direct: Record<string, string>; closure: InstalledPackage[] } {
  const direct: Record<string, string> = {}
  const seen = new Map<string, InstalledPackage>()
  const visit = (pkg: InstalledPackage): void => {
    if (seen.has(pkg.dir)) return
    seen.set(pkg.dir, pkg)
    for (const dep of Object.keys(pkg.dependencies)) {
      if (leaveOut(dep)) continue
      const found = findPackage(dep, pkg.dir)
      if (found === undefined)
        throw new BundleError(
          'E_BUNDLE_BUILD_FAILED',
          `${pkg.name}@${pkg.version} needs ${dep}, which is not installed; run npm ci and build again`,
        )
      visit(found)
    }
    // Optional dependencies (platform binaries) are taken where this machine has them.
    for (const dep of Object.keys(pkg.optionalDependencies)) {
      if (leaveOut(dep)) continue
      const found = findPackage(dep, pkg.dir)
      if (found) visit(found)
    }
  }
  for (const name of [...packages].sort()) {
    const pkg = findPackage(name, from)
    if (pkg === undefined)
      throw new BundleError(
        'E_BUNDLE_BUILD_FAILED',
        `the service imports ${name}, which is not installed where the service is; run npm install ${name} and ` +
          `build again`,
      )
    direct[name] = pkg.version
    visit(pkg)
  }
  const closure = [...seen.values()].sort((a, b) =>
    a.name === b.name ? (a.version < b.version ? -1 : 1) : a.name < b.name ? -1 : 1,
  )
  return { direct, closure }
}

/**
 * The part of the project's package-lock.json a production install of the bundle needs: the
 * root (its direct dependencies) and the lock entries of exactly the installed packages it uses,
 * under the same paths. Undefined when the project has no lockfile, or the lock lacks a
 * package the bundle uses (the package itself, modelbundle in its own repository, say).
 */
export function lockfileFor(
  name: string,
  direct: Record<string, string>,
  closure: readonly InstalledPackage[],
  from: string,
): Record<string, unknown> | undefined {
  let dir = from
  let lockPath: string | undefined
  for (;;) {
    if (existsSync(join(dir, 'package-lock.json'))) {
      lockPath = join(dir, 'package-lock.json')
      break
    }
    const up = dirname(dir)
    if (up === dir) return undefined
    dir = up
  }
  let lock: { lockfileVersion?: number; packages?: Record<string, Record<string, unknown>> }
  try {
    lock = JSON.parse(readFileSync(lockPath, 'utf8')) as typeof lock
  } catch {
    return undefined
  }
  if (lock.packages === undefined) return undefined
  const packages: Record<string, unknown> = { '': { name, dependencies: direct } }
  for (const pkg of closure) {
    const key = relative(dir, pkg.dir).split(sep).join('/')
    const entry = lock.packages[key]
    if (entry === undefined || key === '' || key.startsWith('..')) return undefined
    packages[key] = entry
  }
  return { name, lockfileVersion: 3, requires: true, packages }
}
