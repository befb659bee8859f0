import { relative, sep } from 'node:path'
import { BundleError } from '../errors/index.js'
import { packageOf } from './deps.js'

export interface Compiled {
  /** The compiled entry, relative to the output directory (POSIX), e.g. `service.js`. */
  entry: string
  /** npm packages the code imports (they stay external: installed, not inlined). */
  packages: string[]
}

/**
 * Compiles the service and every local file it imports into one ESM file with esbuild; npm
 * packages stay imports (pinned and installed separately). The output sits at the entry's own
 * relative path (service.ts → service.js), so `new URL('./x', import.meta.url)` still finds
 * files the bundle includes next to it. No source maps and no timestamps: the same sources
 * compile to the same bytes (the bundle digest depends on it).
 */
export async function compileService(rootDir: string, entryFile: string, outDir: string): Promise<Compiled> {
  const esbuild = await import('esbuild')
  const rel = relative(rootDir, entryFile).split(sep).join('/')
  if (rel.startsWith('..'))
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `the service ${entryFile} is outside the bundle directory ${rootDir}`,
    )
  const out = rel.replace(/\.[cm]?tsx?$|\.[cm]?jsx?$/, '.js')
  let result: import('esbuild').BuildResult<{ metafile: true }>
  try {
    result = await esbuild.build({
      absWorkingDir: rootDir,
      entryPoints: [rel],
      outfile: `${outDir}/${out}`,
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      keepNames: true,
      metafile: true,
      logLevel: 'silent',
      legalComments: 'none',
    })
  } catch (err) {
    const first = (err as { errors?: { text: string; location?: { file: string; line: number; column: number } }[] })
      .errors?.[0]
    const where = first?.location ? `${first.location.file}:${first.location.line}:${first.location.column}: ` : ''
    throw new BundleError(
      'E_BUNDLE_BUILD_FAILED',
      `compiling ${rel} failed: ${where}${first?.text ?? (err as Error).message}`,
    )
  }
  const packages = new Set<string>()
  for (const output of Object.values(result.metafile.outputs)) {
    for (const imp of output.imports) {
      const pkg = imp.external ? packageOf(imp.path) : undefined
      if (pkg) packages.add(pkg)
    }
  }
  return { entry: out, packages: [...packages].sort() }
}
