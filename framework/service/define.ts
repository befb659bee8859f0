import { toPriority, type Priority } from '../../runners/index.js'
import type { IODescriptor, InputOf, OutputOf } from '../io/types.js'
import { buildDefinition, type ApiContext, type ServiceDefinition, type ServiceOptions } from './definition.js'

export interface DefinedApi<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>> {
  input: I
  output: O
  route?: string
  description?: string
  /** Priority of this API's runner calls (see `@api`): 1 (most urgent) to 9, or high, normal, low. */
  priority?: Priority
  /** A durable async task (see `@task`); `concurrency`: tasks one server runs at once (default 2). */
  task?: boolean | { concurrency?: number }
  handler: (input: InputOf<I>, context: ApiContext) => OutputOf<O> | Promise<OutputOf<O>>
}

/** Keeps each API's handler typed against its own input/output descriptors. */
export function defineApi<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>>(
  a: DefinedApi<I, O>,
): DefinedApi<I, O> {
  return a
}

export interface DefineServiceOptions extends ServiceOptions {
  apis: Record<string, DefinedApi<any, any>>
  onStartup?: () => unknown
  onShutdown?: () => unknown
}

/**
 * The same definition `@service` builds, without decorators.
 *
 * @example
 * defineService({
 *   name: 'greeter',
 *   apis: {
 *     greet: defineApi({
 *       input: io.json(In),
 *       output: io.json(Out),
 *       handler: async ({ name }) => ({ greeting: `hello ${name}` }),
 *     }),
 *   },
 * })
 */
export function defineService(options: DefineServiceOptions): ServiceDefinition {
  const apis = Object.entries(options.apis).map(([name, a]) => ({
    name,
    route: a.route ?? `/${name}`,
    input: a.input,
    output: a.output,
    ...(a.description ? { description: a.description } : {}),
    ...(a.priority !== undefined ? { priority: toPriority(a.priority, `API ${name}`)! } : {}),
    ...(a.task ? { task: { concurrency: (typeof a.task === 'object' ? a.task.concurrency : undefined) ?? 2 } } : {}),
  }))
  const hooks = {
    onStartup: options.onStartup ? ['__onStartup'] : [],
    onShutdown: options.onShutdown ? ['__onShutdown'] : [],
  }
  return buildDefinition(options, apis, hooks, () => {
    const instance: Record<string, unknown> = {}
    for (const [name, a] of Object.entries(options.apis)) instance[name] = a.handler
    if (options.onStartup) instance.__onStartup = options.onStartup
    if (options.onShutdown) instance.__onShutdown = options.onShutdown
    return instance
  })
}
