import { BundleError } from '../../errors/index.js'
import { isReserved } from '../routes.js'
import type { Runner } from '../../runners/index.js'
import type { HeaderReader, IODescriptor } from '../io/types.js'

export interface TrafficOptions {
  /** A request still running after this long gets 504. Default 60 000. */
  timeoutMs?: number
  /** More concurrent requests than this get 429. Default 128. */
  maxConcurrency?: number
}

/** What an API method receives besides its input. */
export interface ApiContext {
  requestId: string
  /** Aborted when the request times out or the client goes away. */
  signal: AbortSignal
  headers: HeaderReader
}

/**
 * A runner as a service declares it: the runners' one contract (runners/runner.ts), which the
 * server, the /v2 repository, metrics and the CLI use as it is.
 */
export type RunnerDeclaration = Runner

export interface ApiDefinition {
  /** Method name on the service instance. */
  readonly name: string
  /** URL path, with a leading slash. */
  readonly route: string
  readonly input: IODescriptor<any, any>
  readonly output: IODescriptor<any, any>
  readonly description?: string
  /** Priority level of its runner calls, 1 (most urgent) to 9; unset: normal (5). */
  readonly priority?: number
  /** A durable async task: submit/status/result/cancel/retry routes under `route`, kept in Redis. */
  readonly task?: { readonly concurrency: number }
}

/** The frozen, plain description of a service that the server, OpenAPI and bundles work from. */
export interface ServiceDefinition {
  readonly name: string
  readonly description?: string
  readonly traffic: Readonly<Required<TrafficOptions>>
  readonly runners: readonly RunnerDeclaration[]
  readonly apis: readonly ApiDefinition[]
  readonly onStartup: readonly string[]
  readonly onShutdown: readonly string[]
  /** Makes the instance whose methods serve the APIs. */
  readonly create: () => Record<string, unknown>
}

export interface ServiceOptions {
  name: string
  description?: string
  traffic?: TrafficOptions
  runners?: readonly RunnerDeclaration[]
  /**
   * A service with no APIs of its own, serving models over the Open Inference Protocol only (what
   * `bundle serve --models` runs). Without it a service needs at least one API.
   */
  modelsOnly?: boolean
}

const NAME = /^[a-z0-9]([-._a-z0-9]*[a-z0-9])?$/
const ROUTE = /^\/[A-Za-z0-9][-._A-Za-z0-9/]*$/
/** Paths the server owns; an API cannot take them. */

const bad = (msg: string) => new BundleError('E_SERVICE_DEFINITION', msg)

export function buildDefinition(
  options: ServiceOptions,
  apis: readonly ApiDefinition[],
  hooks: { onStartup: string[]; onShutdown: string[] },
  create: () => Record<string, unknown>,
): ServiceDefinition {
  if (typeof options?.name !== 'string' || !NAME.test(options.name) || options.name.length > 63) {
    throw bad(
      `service name ${JSON.stringify(options?.name)} must be lower case [a-z0-9]([-._a-z0-9]*[a-z0-9])?, at most ` +
        `63 characters`,
    )
  }
  const timeoutMs = options.traffic?.timeoutMs ?? 60_000
  const maxConcurrency = options.traffic?.maxConcurrency ?? 128
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw bad(`traffic.timeoutMs must be a positive number, got ${timeoutMs}`)
  if (!Number.isSafeInteger(maxConcurrency) || maxConcurrency <= 0)
    throw bad(`traffic.maxConcurrency must be a positive integer, got ${maxConcurrency}`)
  if (apis.length === 0 && !options.modelsOnly) throw bad(`service ${options.name} has no @api methods`)
  const routes = new Map<string, string>()
  for (const a of apis) {
    if (!ROUTE.test(a.route))
      throw bad(`API ${a.name}: route "${a.route}" must look like /name (letters, digits, - . _ /)`)
    if (isReserved(a.route)) throw bad(`API ${a.name}: route ${a.route} is reserved by the server`)
    if (a.input.kind === 'stream' && a.output.kind !== 'stream')
      throw bad(`API ${a.name}: a stream input makes a WebSocket route, whose output must be io.stream(…) too`)
    if (a.input.kind !== 'stream' && (a.output as { item?: { kind: string } }).item?.kind === 'bytes')
      throw bad(`API ${a.name}: io.stream(io.bytes()) answers only WebSocket routes (whose input is io.stream)`)
    if (a.task && (a.output.kind === 'stream' || a.input.kind === 'stream'))
      throw bad(`task ${a.name}: a task's input and result are kept whole in Redis; neither can be io.stream`)
    const prior = routes.get(a.route)
    if (prior !== undefined) throw bad(`APIs ${prior} and ${a.name} both use route ${a.route}`)
    routes.set(a.route, a.name)
  }
  const runnerNames = new Set<string>()
  for (const r of options.runners ?? []) {
    if (runnerNames.has(r.name)) throw bad(`two runners are named ${r.name}`)
    runnerNames.add(r.name)
  }
  return Object.freeze({
    name: options.name,
    ...(options.description === undefined ? {} : { description: options.description }),
    traffic: Object.freeze({ timeoutMs, maxConcurrency }),
    runners: Object.freeze([...(options.runners ?? [])]),
    apis: Object.freeze(apis.map((a) => Object.freeze({ ...a }))),
    onStartup: Object.freeze([...hooks.onStartup]),
    onShutdown: Object.freeze([...hooks.onShutdown]),
    create,
  })
}
