import { existsSync, readFileSync } from 'node:fs'
import { register } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BundleError } from '../../errors/index.js'

type Loaded = Record<string, unknown>
let tsx: ((url: string) => Promise<Loaded>) | undefined

/** This code runs from its TypeScript sources (tests), under a tsx loaded for the whole process. */
export const fromSources = import.meta.url.endsWith('.ts')

/**
 * tsx's loaders under one namespace for this process (as tsImport registers them, once instead of
 * per file), with shared-modules.ts after them: the JavaScript a TypeScript file imports (the
 * framework, zod, pino…) is the copy this process already runs, not a second one.
 */
async function tsxLoader(): Promise<(url: string) => Promise<Loaded>> {
  if (tsx) return tsx
  const namespace = 'modelbundle'
  ;(await import('tsx/cjs/api')).register({ namespace })
  const esm = (await import('tsx/esm/api')).register({ namespace })
  register(new URL('./shared-modules.js', import.meta.url), {
    parentURL: import.meta.url,
    data: { own: new URL('../../../', import.meta.url).href },
  })
  tsx = (url) => esm.import(url, import.meta.url) as Promise<Loaded>
  return tsx
}

/** The package.json whose "type" decides how a file loads: the nearest one above it. */
function scopeOf(file: string): { path?: string; type?: unknown } {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const path = join(dir, 'package.json')
    if (existsSync(path)) {
      try {
        return { path, type: (JSON.parse(readFileSync(path, 'utf8')) as { type?: unknown }).type }
      } catch {
        return { path } // unreadable: Node treats the file as CommonJS too
      }
    }
    if (dirname(dir) === dir) return {}
  }
}

/**
 * A TypeScript file through tsx (see tsxLoader). It must load as an ES module — as every service
 * and runner module does: the framework is one (a CommonJS file's require() of it fails inside
 * its dependencies, with a message that says nothing of the cause).
 */
export async function importTypeScript(path: string): Promise<Loaded> {
  if (!/\.m[jt]s$/.test(path)) {
    const scope = /\.c[jt]s$/.test(path) ? { path: undefined, type: 'commonjs' } : scopeOf(path)
    if (scope.type !== 'module')
      throw new BundleError(
        'E_SERVICE_LOAD',
        `${path} would load as CommonJS (${
          scope.path ? `${scope.path} has no "type": "module"` : 'no package.json above it says "type": "module"'
        }); services and runner modules are ES modules: add "type": "module" to the project's package.json, or ` +
          'name the file .mts (.mjs)',
      )
  }
  return (await tsxLoader())(pathToFileURL(path).href)
}

/**
 * A module a worker loads by path: a backend, a custom runner's class. TypeScript goes through
 * importTypeScript (as `bundle serve` loads services) unless this code itself runs from TypeScript
 * sources, where tsx is loaded already.
 */
export async function importModule(path: string): Promise<Loaded> {
  if (/\.[cm]?ts$/.test(path) && !fromSources) return importTypeScript(path)
  return (await import(pathToFileURL(path).href)) as Loaded
}
