import { cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, sep } from 'node:path'
import { BundleError } from '../errors/index.js'
import { findPackage, pinDependencies, type InstalledPackage } from './deps.js'

/** Native binaries for other platforms (onnxruntime ships every OS and CPU): not for this image. */
const OTHER_PLATFORMS = ['darwin', 'win32', 'linux/arm64', 'linux/x64'].filter((p) => p !== `${process.platform}/${process.arch}` && p !== process.platform)

function skip(pkgDir: string, path: string): boolean {
  const rel = relative(pkgDir, path).split(sep).join('/')
  if (rel === 'node_modules' || rel.startsWith('node_modules/')) return true // nested packages are copied on their own
  const napi = /^bin\/napi-v\d+\/(.+)$/.exec(rel)
  return napi !== null && OTHER_PLATFORMS.some((p) => napi[1] === p || napi[1]!.startsWith(p + '/'))
}

/** The files of a package as npm would install them: its `files` list when it has one (modelbundle itself, from a clone). */
function packageFiles(pkg: InstalledPackage): string[] | undefined {
  const json = JSON.parse(readFileSync(join(pkg.dir, 'package.json'), 'utf8')) as { files?: string[] }
  return json.files ? ['package.json', ...json.files] : undefined
}

/**
 * Copies the production dependencies a bundle pins into `dest/node_modules`, from what is
 * installed where `from` resolves them, checking each version against the bundle's pins. The
 * layout of the source install is kept (a nested second version stays nested), so Node resolves
 * exactly what the bundle was built and tested with. No registry is involved.
 */
export function vendorDependencies(direct: Record<string, string>, pinned: readonly string[], from: string, dest: string): number {
  const { closure } = pinDependencies(Object.keys(direct), from)
  const want = new Set(pinned)
  for (const [name, version] of Object.entries(direct)) {
    const found = findPackage(name, from)
    if (found?.version !== version) throw new BundleError('E_BUNDLE_DEPS_MISMATCH', `the bundle was built with ${name}@${version}; this machine has ${found ? found.version : 'none'} installed where ${from} resolves it; install that version (npm ci in the project it was built from) or build the bundle again`)
  }
  let copied = 0
  for (const pkg of closure) {
    if (!want.has(`${pkg.name}@${pkg.version}`)) throw new BundleError('E_BUNDLE_DEPS_MISMATCH', `${pkg.name}@${pkg.version} is installed, the bundle pins ${[...want].filter((w) => w.startsWith(pkg.name + '@')).join(', ') || 'no version of it'}; npm ci and build again`)
    // Where it goes: its path below the innermost node_modules chain, or the top for the package itself.
    const at = pkg.dir.lastIndexOf(`${sep}node_modules${sep}`)
    const rel = at < 0 ? pkg.name : pkg.dir.slice(pkg.dir.indexOf(`${sep}node_modules${sep}`) + '/node_modules/'.length)
    const target = join(dest, 'node_modules', rel)
    mkdirSync(dirname(target), { recursive: true })
    const only = packageFiles(pkg)
    if (only && at < 0) {
      // A package from a source checkout (modelbundle itself): what npm pack would publish.
      for (const f of only) if (existsSync(join(pkg.dir, f))) cpSync(join(pkg.dir, f), join(target, f), { recursive: true, dereference: true })
    } else {
      cpSync(pkg.dir, target, { recursive: true, dereference: true, filter: (src) => !skip(pkg.dir, src) || src === pkg.dir })
    }
    copied++
  }
  return copied
}

