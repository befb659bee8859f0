// Module resolution hooks for `bundle serve TAG` on a machine (not a container): a bundle's
// compiled code imports npm packages by name, and its directory in the store has no
// node_modules. Bare imports it cannot resolve are resolved from the current project, then
// from modelbundle's own installation (which holds modelbundle itself and its dependencies).
// Containers install the bundle's dependencies next to it and do not use this.
// Registered with module.register(); runs on Node's hooks thread.

interface Data {
  /** file:// URL of the bundle directory (with a trailing slash). */
  root: string
  /** file:// URLs to resolve from, in order. */
  bases: string[]
}

let data: Data = { root: '', bases: [] }

export function initialize(d: Data): void {
  data = d
}

type Next = (specifier: string, context: { parentURL?: string }) => Promise<unknown>

export async function resolve(specifier: string, context: { parentURL?: string }, next: Next): Promise<unknown> {
  try {
    return await next(specifier, context)
  } catch (err) {
    const bare = !/^(?:\.|\/|[a-z]+:)/.test(specifier)
    if (
      !bare ||
      (err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND' ||
      !context.parentURL?.startsWith(data.root)
    )
      throw err
    for (const base of data.bases) {
      try {
        return await next(specifier, { ...context, parentURL: base })
      } catch {
        // try the next base
      }
    }
    throw err
  }
}
