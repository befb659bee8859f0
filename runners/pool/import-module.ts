import { pathToFileURL } from 'node:url'

/**
 * A module a worker loads by path: a backend, a custom runner's class. TypeScript goes through
 * tsx (as `bundle serve` loads services) unless this code itself runs from TypeScript sources,
 * where tsx is loaded already.
 */
export async function importModule(path: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path).href
  if (/\.[cm]?ts$/.test(path) && !import.meta.url.endsWith('.ts'))
    return (await (await import('tsx/esm/api')).tsImport(url, import.meta.url)) as Record<string, unknown>
  return (await import(url)) as Record<string, unknown>
}
