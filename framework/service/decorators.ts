import { BundleError } from '../../errors/index.js'
import { toPriority, type Priority } from '../../runners/index.js'
import type { IODescriptor, InputOf, OutputOf } from '../io/types.js'
import {
  buildDefinition,
  type ApiContext,
  type ApiDefinition,
  type ServiceDefinition,
  type ServiceOptions,
} from './definition.js'

// Keys in context.metadata; Symbol.for so that two copies of the framework still agree.
const APIS = Symbol.for('modelbundle.apis')
const HOOKS = Symbol.for('modelbundle.hooks')
const DEFINITION = Symbol.for('modelbundle.definition')

export interface ApiOptions<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>> {
  input: I
  output: O
  /** URL path; defaults to `/<method name>`. */
  route?: string
  description?: string
  /**
   * Priority of this API's runner calls: 1 (most urgent, batched first) to 9, or high (1),
   * normal (5, the default), low (9). A request's `Request-Priority` header overrides it.
   */
  priority?: Priority
}

type Hooks = { onStartup: string[]; onShutdown: string[] }

function metadataOf(context: { metadata?: DecoratorMetadataObject }): DecoratorMetadataObject {
  // Without Symbol.metadata (Node 20) there is no metadata object; framework/index.ts polyfills it.
  if (context.metadata === undefined)
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      "decorator metadata is unavailable: import from 'modelbundle' before declaring the service class",
    )
  return context.metadata
}

/**
 * The class's own list under `key`. A subclass's metadata inherits from its parent's through
 * the prototype chain: take a copy of the inherited list instead of pushing into the parent's.
 */
function ownList<T>(metadata: DecoratorMetadataObject, key: symbol, empty: () => T, copy: (inherited: T) => T): T {
  if (!Object.hasOwn(metadata, key)) {
    const inherited = metadata[key] as T | undefined
    metadata[key] = inherited === undefined ? empty() : copy(inherited)
  }
  return metadata[key] as T
}

function hooksOf(context: { metadata?: DecoratorMetadataObject }): Hooks {
  return ownList<Hooks>(
    metadataOf(context),
    HOOKS,
    () => ({ onStartup: [], onShutdown: [] }),
    (h) => ({ onStartup: [...h.onStartup], onShutdown: [...h.onShutdown] }),
  )
}

function plainMethod(context: ClassMethodDecoratorContext<any, any>, what: string): string {
  if (context.static || context.private || typeof context.name !== 'string') {
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      `${what} goes on a public instance method (found on ${String(context.name)})`,
    )
  }
  return context.name
}

/**
 * Marks a method as an HTTP API. The method must take the input type of `input` and return
 * the output type of `output` (or a promise of it); anything else fails to compile.
 *
 * @example
 * @api({ input: io.json(z.object({ name: z.string() })), output: io.json(z.object({ greeting: z.string() })) })
 * async greet({ name }: { name: string }) { return { greeting: `hello ${name}` } }
 */
export function api<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>>(options: ApiOptions<I, O>) {
  return <This>(
    _method: (this: This, input: InputOf<I>, context: ApiContext) => OutputOf<O> | Promise<OutputOf<O>>,
    context: ClassMethodDecoratorContext<
      This,
      (this: This, input: InputOf<I>, context: ApiContext) => OutputOf<O> | Promise<OutputOf<O>>
    >,
  ): void => {
    const name = plainMethod(context, '@api')
    const list = ownList<ApiDefinition[]>(
      metadataOf(context),
      APIS,
      () => [],
      (l) => [...l],
    )
    // A subclass redefining an inherited API replaces it.
    const at = list.findIndex((x) => x.name === name)
    if (at >= 0) list.splice(at, 1)
    const priority = toPriority(options.priority, `@api ${name}`)
    list.push({
      name,
      route: options.route ?? `/${name}`,
      input: options.input,
      output: options.output,
      ...(options.description ? { description: options.description } : {}),
      ...(priority !== undefined ? { priority } : {}),
    })
  }
}

export interface TaskOptions<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>>
  extends ApiOptions<I, O> {
  /** Tasks of this kind one server runs at once (default 2); more replicas run more. */
  concurrency?: number
}

/**
 * Marks a method as a durable async task (long jobs): `POST <route>/submit` answers at once
 * with a taskId; `GET <route>/status`, `GET <route>/result`, `POST <route>/cancel` and
 * `POST <route>/retry` take `?taskId=`. Tasks live in Redis (through BullMQ), so any replica
 * answers for them and they survive a restart; the server needs `--redis`.
 *
 * @example
 * @task({ input: io.json(z.object({ url: z.string() })), output: io.json(Report) })
 * async transcribe({ url }: { url: string }, ctx: ApiContext) { … } // ctx.signal aborts on cancel
 */
export function task<I extends IODescriptor<any, any>, O extends IODescriptor<any, any>>(options: TaskOptions<I, O>) {
  const mark = api(options)
  return <This>(
    method: (this: This, input: InputOf<I>, context: ApiContext) => OutputOf<O> | Promise<OutputOf<O>>,
    context: ClassMethodDecoratorContext<
      This,
      (this: This, input: InputOf<I>, context: ApiContext) => OutputOf<O> | Promise<OutputOf<O>>
    >,
  ): void => {
    mark(method, context)
    const list = metadataOf(context)[APIS] as ApiDefinition[]
    const i = list.findIndex((x) => x.name === context.name)
    list[i] = { ...list[i]!, task: { concurrency: options.concurrency ?? 2 } }
  }
}

/** Runs before the server reports ready (load resources, warm up). */
export function onStartup<This>(
  _method: (this: This) => unknown,
  context: ClassMethodDecoratorContext<This, (this: This) => unknown>,
): void {
  hooksOf(context).onStartup.push(plainMethod(context, '@onStartup'))
}

/** Runs during graceful shutdown, after in-flight requests finished. */
export function onShutdown<This>(
  _method: (this: This) => unknown,
  context: ClassMethodDecoratorContext<This, (this: This) => unknown>,
): void {
  hooksOf(context).onShutdown.push(plainMethod(context, '@onShutdown'))
}

/**
 * Turns a class into a service. Decorators only record data; this builds the frozen
 * definition that `serve`, OpenAPI and bundles read (`definitionOf(Class)`).
 */
export function service(options: ServiceOptions) {
  return <C extends new () => object>(cls: C, context: ClassDecoratorContext<C>): void => {
    const metadata = metadataOf(context)
    const apis = (metadata[APIS] as ApiDefinition[] | undefined) ?? []
    const hooks = (metadata[HOOKS] as Hooks | undefined) ?? { onStartup: [], onShutdown: [] }
    const definition = buildDefinition(options, apis, hooks, () => new cls() as Record<string, unknown>)
    Object.defineProperty(cls, DEFINITION, { value: definition, enumerable: false })
  }
}

export function definitionOf(value: unknown): ServiceDefinition | undefined {
  if (value === null || (typeof value !== 'function' && typeof value !== 'object')) return undefined
  if (typeof value === 'object' && 'apis' in value && 'create' in value && 'traffic' in value)
    return value as ServiceDefinition
  return (value as Record<symbol, ServiceDefinition | undefined>)[DEFINITION]
}
