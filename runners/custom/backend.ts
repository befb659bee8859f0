// The custom backend: a user's TypeScript (or JavaScript) class in a runner worker
// (runners/pool/backend.ts's contract). Every method of the instance can be called by name.
import type { Backend, BackendContext, BackendMethod } from '../pool/backend.js'
import { importModule } from '../pool/import-module.js'

export interface CustomBackendOptions {
  /** The module's absolute path. */
  module: string
  /** The export: a class (instantiated with no arguments) or an object. */
  exportName: string
}

export async function load(options: unknown, _context: BackendContext): Promise<Backend> {
  const o = options as CustomBackendOptions
  const exported = (await importModule(o.module))[o.exportName]
  if (exported === undefined) throw new Error(`${o.module} has no export named ${o.exportName}`)
  const instance = (typeof exported === 'function' ? new (exported as new () => object)() : exported) as Record<
    string,
    unknown
  >
  await (instance as { setup?: () => unknown }).setup?.()
  return { methods: methodsOf(instance) }
}

/** Every function on the instance and its prototype chain (not Object's), bound to it. */
function methodsOf(instance: Record<string, unknown>): Record<string, BackendMethod> {
  const methods: Record<string, BackendMethod> = {}
  let proto: object | null = instance
  while (proto !== null && proto !== Object.prototype) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== 'constructor' && typeof instance[name] === 'function' && !(name in methods))
        methods[name] = (instance[name] as BackendMethod).bind(instance)
    }
    proto = Object.getPrototypeOf(proto)
  }
  return methods
}
