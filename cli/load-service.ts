import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BundleError } from '../errors/index.js'
import type { ServiceDefinition } from '../framework/index.js'
import { fromSources, importTypeScript } from '../runners/pool/import-module.js'
import { compileErrorMessage } from './compile-error.js'

/** Splits `path/to/service.ts:ClassName` (the class part is optional). */
export function parseEntry(entry: string): { file: string; className?: string } {
  const m = /^(.*?\.(?:[cm]?ts|[cm]?js|tsx|jsx))(?::([A-Za-z_$][\w$]*))?$/.exec(entry)
  if (!m) throw new BundleError('E_SERVICE_LOAD', `"${entry}" is not path/to/service.ts[:ClassName]`)
  return { file: resolve(m[1]!), ...(m[2] ? { className: m[2] } : {}) }
}

/**
 * Imports a service file (TypeScript through tsx, at run time) and returns its definition:
 * the named export, or the only exported service.
 */
export async function loadService(entry: string): Promise<ServiceDefinition> {
  return (await findService(entry)).definition
}

/** loadService, also saying which export holds the service (a bundle records it). */
export async function findService(entry: string): Promise<{ definition: ServiceDefinition; exportName: string }> {
  const { file, className } = parseEntry(entry)
  if (!existsSync(file) || !statSync(file).isFile()) throw new BundleError('E_SERVICE_LOAD', `${file}: no such file`)
  const { definitionOf } = await import('../framework/index.js')
  let mod: Record<string, unknown>
  try {
    mod = fromSources
      ? ((await (await import('tsx/esm/api')).tsImport(pathToFileURL(file).href, import.meta.url)) as Record<
          string,
          unknown
        >)
      : await importTypeScript(file)
  } catch (err) {
    if ((err as { code?: string })?.code?.startsWith('E_')) throw err
    // A syntax error says where it is, with the line, as the compiler would; anything else its first line.
    const compiled = compileErrorMessage(err, file)
    if (compiled !== undefined) throw new BundleError('E_SERVICE_LOAD', compiled, { cause: err })
    throw new BundleError('E_SERVICE_LOAD', `importing ${file} failed: ${(err as Error).message?.split('\n')[0]}`, {
      cause: err,
    })
  }
  const services = Object.entries(mod).flatMap(([name, value]) => {
    const def = definitionOf(value)
    return def ? [{ name, def }] : []
  })
  if (className !== undefined) {
    const found = services.find((s) => s.name === className)
    if (!found)
      throw new BundleError(
        'E_SERVICE_LOAD',
        `${file} has no exported service named ` +
          `${className}${services.length ? ` (it exports ${services.map((s) => s.name).join(', ')})` : ''}`,
      )
    return { definition: found.def, exportName: found.name }
  }
  if (services.length === 0)
    throw new BundleError(
      'E_SERVICE_LOAD',
      `${file} exports no service: decorate an exported class with @service (or export a defineService() result)`,
    )
  if (services.length > 1)
    throw new BundleError(
      'E_SERVICE_LOAD',
      `${file} exports several services (${services.map((s) => s.name).join(', ')}); pick one with ${file}:ClassName`,
    )
  return { definition: services[0]!.def, exportName: services[0]!.name }
}
