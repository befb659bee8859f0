import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, sep } from 'node:path'
import { BundleError } from '../errors/index.js'
import { findPackage, pinDependencies, type InstalledPackage } from './deps.js'
import { BUILD_ONLY_PACKAGES, imageArch, pruneRules, sizeOf } from './prune.js'

/** What went into the image's node_modules, and what was left out. */
export interface VendorStats {
  packages: number
  files: number
  bytes: number
  /** Build-only packages of the closure that stayed out (esbuild, tsx and what only they need). */
  leftOutPackages: string[]
  /** Files left out of the copied packages by the rules in prune.ts, by reason. */
  pruned: Record<string, { files: number; bytes: number }>
}

export interface VendorOptions {
  /** tsx (and esbuild under it) go into the image: the bundle carries TypeScript modules. */
  typescript?: boolean
  /** CPU architecture of the image (default: this machine's). */
  arch?: string
}

/**
 * The files of a package as npm would install them: its `files` list when it has one (modelbundle
 * itself, from a clone).
 */
function packageFiles(pkg: InstalledPackage): string[] | undefined {
  const json = JSON.parse(readFileSync(join(pkg.dir, 'package.json'), 'utf8')) as { files?: string[] }
  return json.files ? ['package.json', ...json.files] : undefined
}

/**
 * Copies the production dependencies a bundle pins into `dest/node_modules`, from what is
 * installed where `from` resolves them, checking each version against the bundle's pins. The
 * layout of the source install is kept (a nested second version stays nested), so Node resolves
 * exactly what the bundle was built and tested with. No registry is involved. Only what runs
 * goes in: build-only packages and files no package loads at run time stay out (prune.ts).
 */
export function vendorDependencies(
  direct: Record<string, string>,
  pinned: readonly string[],
  from: string,
  dest: string,
  o: VendorOptions = {},
): VendorStats {
  // tsx runs on esbuild: a bundle that imports either, or carries TypeScript, gets both.
  const buildOnly = new Set(o.typescript || BUILD_ONLY_PACKAGES.some((n) => n in direct) ? [] : BUILD_ONLY_PACKAGES)
  const { closure } = pinDependencies(Object.keys(direct), from, (name) => buildOnly.has(name))
  const full = buildOnly.size ? pinDependencies(Object.keys(direct), from).closure : closure
  const kept = new Set(closure.map((p) => p.dir))
  const want = new Set(pinned)
  for (const [name, version] of Object.entries(direct)) {
    const found = findPackage(name, from)
    if (found?.version !== version)
      throw new BundleError(
        'E_BUNDLE_DEPS_MISMATCH',
        `the bundle was built with ${name}@${version}; this machine has ${found ? found.version : 'none'} ` +
          `installed where ${from} resolves it; install that version (npm ci in the project it was built from) or ` +
          `build the bundle again`,
      )
  }
  const stats: VendorStats = {
    packages: 0,
    files: 0,
    bytes: 0,
    leftOutPackages: full.filter((p) => !kept.has(p.dir)).map((p) => `${p.name}@${p.version}`),
    pruned: {},
  }
  const ctx = { arch: o.arch ?? imageArch(), typescript: buildOnly.size === 0 }
  for (const pkg of closure) {
    if (!want.has(`${pkg.name}@${pkg.version}`))
      throw new BundleError(
        'E_BUNDLE_DEPS_MISMATCH',
        `${pkg.name}@${pkg.version} is installed, the bundle pins ` +
          `${[...want].filter((w) => w.startsWith(`${pkg.name}@`)).join(', ') || 'no version of it'}; npm ci and ` +
          `build again`,
      )
    // Where it goes: its path below the innermost node_modules chain, or the top for the package itself.
    const at = pkg.dir.lastIndexOf(`${sep}node_modules${sep}`)
    const rel = at < 0 ? pkg.name : pkg.dir.slice(pkg.dir.indexOf(`${sep}node_modules${sep}`) + '/node_modules/'.length)
    const target = join(dest, 'node_modules', rel)
    const leaveOut = pruneRules(pkg.dir, ctx)
    // A package from a source checkout (modelbundle itself): what npm pack would publish.
    const only = at < 0 ? packageFiles(pkg) : undefined
    const top = only ? only.filter((f) => existsSync(join(pkg.dir, f))) : readdirSync(pkg.dir)
    mkdirSync(target, { recursive: true })
    for (const name of top) copyTree(pkg.dir, name, target, leaveOut, stats)
    stats.packages++
  }
  return stats
}

/** Copies `pkgDir/rel` to `target/rel` (links followed), leaving out what the rules say; tallies both. */
function copyTree(
  pkgDir: string,
  rel: string,
  target: string,
  leaveOut: (rel: string, isDir: boolean) => string | undefined,
  stats: VendorStats,
): void {
  const src = join(pkgDir, rel)
  const st = statSync(src)
  const isDir = st.isDirectory()
  // Nested packages are copied on their own (when the closure has them).
  if (isDir && (rel === 'node_modules' || rel.endsWith('/node_modules'))) return
  const why = leaveOut(rel.split(sep).join('/'), isDir)
  if (why !== undefined) {
    const s = sizeOf(src)
    const tally = (stats.pruned[why] ??= { files: 0, bytes: 0 })
    tally.files += s.files
    tally.bytes += s.bytes
    return
  }
  const dest = join(target, rel)
  if (isDir) {
    mkdirSync(dest, { recursive: true })
    for (const name of readdirSync(src)) copyTree(pkgDir, `${rel}/${name}`, target, leaveOut, stats)
  } else if (st.isFile()) {
    mkdirSync(dirname(dest), { recursive: true })
    copyFileSync(src, dest)
    stats.files++
    stats.bytes += st.size
  }
}
