import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

// What of an installed npm package goes into an image. The image runs `bundle serve` on Linux
// and nothing else: no compiler, no type checker, no test runner. These rules leave out what no
// package loads at run time there; each one is by kind of file, never by package, so they apply
// to whatever a bundle depends on. docs/bundles.md "Containers" lists them.

/**
 * Packages modelbundle needs to build bundles, not to serve them: esbuild compiles services,
 * tsx loads TypeScript at run time (with esbuild beneath it, and esbuild's platform binary,
 * @esbuild/*, as its optional dependency). A bundle is compiled JavaScript, so they stay out of
 * the image — unless the bundle's own code imports them, or the bundle carries TypeScript
 * modules that a worker loads through tsx (a custom runner's module listed under `include`).
 * The CycloneDX library writes a bundle's SBOM at build time; the image carries the SBOM it wrote.
 */
export const BUILD_ONLY_PACKAGES: readonly string[] = ['esbuild', 'tsx', '@cyclonedx/cyclonedx-library']

/** TypeScript sources in a bundle (declarations aside): run through tsx when loaded. */
export const TYPESCRIPT_MODULE = /(?<!\.d)\.(?:[cm]?ts|tsx)$/

/** The image's platform: Linux on this machine's CPU architecture (an image runs where its addons were built). */
export const imageArch = (): string => process.arch

export interface PruneContext {
  /** CPU architecture of the image (`x64`, `arm64`). */
  arch: string
  /** Whether tsx goes into the image: then TypeScript files of packages stay (tsx could load them). */
  typescript: boolean
}

/** Licence texts stay with the code they license. */
const LICENSE = /^(?:licen[cs]e|notice|copying)(?:[.-][^/]*)?$/i
const DOCS = /\.(?:md|markdown)$/i
const SOURCE_MAP = /\.map$/
const DECLARATIONS = /\.d\.[cm]?ts$|\.tsbuildinfo$/
const TEST_DIRS = new Set(['test', 'tests', '__tests__', '.github'])
/**
 * Builds for a browser's script tag (AMD, UMD, a global variable, an IIFE), which packages such
 * as luxon ship beside their CommonJS and ES module builds: Node loads neither format's folder
 * unless a package names it as an entry point (then it stays, as every entry point does).
 */
const BROWSER_SCRIPT_DIRS = new Set(['amd', 'umd', 'global', 'iife'])
/** C/C++ sources and gyp files: compiled into build/Release/*.node, never loaded themselves. */
const NATIVE_SOURCE = /\.(?:c|cc|cpp|cxx|h|hh|hpp|hxx|gyp|gypi)$/

/** A package's own entry points (main, exports, bin …): never left out, nor the folders holding them. */
function entryPoints(pkgDir: string): string[] {
  let json: Record<string, unknown>
  try {
    json = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as Record<string, unknown>
  } catch {
    return []
  }
  const out: string[] = []
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.push(v.replace(/^\.\//, '').replace(/\*.*$/, ''))
    else if (v && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) if (k !== 'types' && k !== 'typings') walk(x)
  }
  for (const key of ['main', 'module', 'bin', 'exports', 'imports']) walk(json[key])
  if (typeof json.browser === 'string') walk(json.browser)
  return out.filter((p) => p !== '' && !p.startsWith('..'))
}

function holdsNativeSource(dir: string): boolean {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory() ? holdsNativeSource(join(dir, e.name)) : NATIVE_SOURCE.test(e.name)) return true
  }
  return false
}

/**
 * The rule set for one installed package: given a path inside it (POSIX, relative to the
 * package directory), the reason it is left out of the image, or undefined to copy it.
 *
 * - docs (`*.md`), source maps (`*.map`), type declarations (`*.d.ts`, `.tsbuildinfo`), test
 *   folders (`test/`, `tests/`, `__tests__/`, `.github/`); licence files always stay;
 * - browser script builds: folders named `amd`, `umd`, `global` or `iife` below the top level
 *   (`build/amd/`, `dist/umd/`);
 * - TypeScript sources (`*.ts`), unless tsx goes into the image;
 * - native binaries for other platforms: `bin/napi-v*\/<os>/<arch>/` (onnxruntime-node) and
 *   `prebuilds/<os>-<arch>/` (node-gyp-build) other than linux and the image's arch;
 * - a node-gyp package's build tree (it has `binding.gyp`): of `build/` only the compiled
 *   `build/Release/*.node` stays; top-level folders holding C/C++ sources or gyp files (`deps/`,
 *   `src/`: compiled into that .node, with their build scripts) go.
 *
 * A package's entry points (package.json main/exports/bin) and package.json itself always stay.
 */
export function pruneRules(pkgDir: string, ctx: PruneContext): (rel: string, isDir: boolean) => string | undefined {
  const entries = entryPoints(pkgDir)
  const addon = existsSync(join(pkgDir, 'binding.gyp'))
  const protectedPath = (rel: string, isDir: boolean) =>
    entries.some((e) => e === rel || (isDir && e.startsWith(`${rel}/`)))
  return (rel, isDir) => {
    if (rel === 'package.json' || protectedPath(rel, isDir)) return undefined
    const parts = rel.split('/')
    const name = parts.at(-1)!
    if (!isDir && LICENSE.test(name)) return undefined
    if (isDir && TEST_DIRS.has(name)) return 'tests'
    if (isDir && parts.length > 1 && BROWSER_SCRIPT_DIRS.has(name)) return 'browser script builds'
    if (!isDir && DOCS.test(name)) return 'docs'
    if (!isDir && SOURCE_MAP.test(name)) return 'source maps'
    if (!isDir && DECLARATIONS.test(name)) return 'type declarations'
    if (!isDir && !ctx.typescript && TYPESCRIPT_MODULE.test(name)) return 'TypeScript sources'
    const napi = /^bin\/napi-v\d+\/([^/]+)(?:\/([^/]+))?/.exec(rel)
    if (napi && (napi[1] !== 'linux' || (napi[2] !== undefined && napi[2] !== ctx.arch))) return 'other platforms'
    const prebuilt = /^prebuilds\/([a-z0-9]+)-([^/]+)/.exec(rel)
    if (prebuilt && (prebuilt[1] !== 'linux' || !prebuilt[2]!.split(/[+-]/).includes(ctx.arch)))
      return 'other platforms'
    if (addon && parts[0] === 'build' && parts.length > 1) {
      const keep = isDir
        ? rel === 'build/Release'
        : parts.length === 3 && parts[1] === 'Release' && name.endsWith('.node')
      if (!keep) return 'native build tree'
    }
    if (addon && isDir && parts.length === 1 && name !== 'build' && holdsNativeSource(join(pkgDir, rel)))
      return 'native build tree'
    return undefined
  }
}

/** Bytes and files under a path (a left-out folder, for the tally). */
export function sizeOf(path: string): { files: number; bytes: number } {
  const st = statSync(path)
  if (!st.isDirectory()) return { files: 1, bytes: st.size }
  let files = 0
  let bytes = 0
  for (const name of readdirSync(path)) {
    const s = sizeOf(join(path, name))
    files += s.files
    bytes += s.bytes
  }
  return { files, bytes }
}
