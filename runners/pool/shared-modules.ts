// A module resolution hook beside tsx's, for TypeScript loaded at run time (import-module.ts).
// tsx loads a TypeScript file under a namespace of its own (a query on every URL it resolves
// from there), so the file's imports of JavaScript modules — `modelbundle` itself, zod, pino —
// would each load a second copy beside the one this process already runs: twice the start-up
// and two copies of every module-level state. A JavaScript module inside node_modules or inside
// modelbundle's own installation resolves without the namespace, to the copy already loaded;
// TypeScript keeps it (tsx must compile it).
// Registered with module.register() after tsx's hooks, so it sees what tsx resolved; runs on
// Node's hooks thread.

interface Data {
  /** file:// URL of modelbundle's installation (with a trailing slash). */
  own: string
}

let own = ''

export function initialize(d: Data): void {
  own = d.own
}

type Next = (specifier: string, context: unknown) => Promise<{ url: string }>

const NAMESPACE = 'tsx-namespace'

export async function resolve(specifier: string, context: unknown, next: Next): Promise<{ url: string }> {
  const r = await next(specifier, context)
  if (!r.url.startsWith('file:') || !r.url.includes(NAMESPACE)) return r
  const url = new URL(r.url)
  const path = url.pathname
  if (/\.(?:[cm]?tsx?)$/.test(path) || !(path.includes('/node_modules/') || url.href.startsWith(own))) return r
  url.searchParams.delete(NAMESPACE)
  return { ...r, url: url.href }
}
