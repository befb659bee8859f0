import type { ModelInfo } from '../store/index.js'
import type { DispatcherStats } from './batching/dispatcher.js'
import type { RunnerOverrides } from './config.js'
import type { InferenceModel } from './inference.js'
import type { RunnerHealth, RunnerMetrics } from './metrics.js'
import type { RedisLink } from './remote/link.js'
import type { TraceCarrier } from './tracing/index.js'
import type { RemoteTarget } from './remote/target.js'

/** The built-in kinds, and any a backend module adds (backendRunner). */
export type RunnerKind = 'onnx' | 'custom' | 'ensemble' | (string & {})
export type { RunnerHealth } from './metrics.js'

type LogCall = (fields: Record<string, unknown>, message: string) => void

/**
 * Where a runner reports what an operator should know but no request sees (a default warm-up
 * that failed, its workers' own output): the server's logger (pino's call shape), attached
 * before start. `level` is the least severe level it writes.
 */
export interface RunnerLog {
  level?: string
  warn: LogCall
  trace?: LogCall
  debug?: LogCall
  info?: LogCall
  error?: LogCall
  fatal?: LogCall
}

/** A runner whose model version can change while it serves (the /v2 repository's load and unload). */
export interface RunnerVersions {
  /** The tag the runner was declared with (`name:version`, `name:latest`, …). */
  readonly tag: string
  /** The model it serves, once started. */
  readonly model: ModelInfo | undefined
  /** Loads `tag` beside the current model and switches to it without failing a request. */
  swap(tag: string): Promise<void>
  /** Before start: serve exactly this version and content (a bundle's pin). */
  pin(tag: string, digest: string): void
}

/** A runner whose batches can run on other machines (`bundle serve --runners remote`, `bundle worker`). */
export interface RunnerRemote {
  /** Before start: send batches to remote workers through Redis. */
  useRemote(target: RemoteTarget): void
  /**
   * Runs one formed batch on this runner's own workers: what `bundle worker` does with a job.
   * `deadline` (performance.now() time): when the batch's requests give up — how long a model
   * loaded on demand (`bundle worker --memory-budget`) may take to load.
   */
  execute(method: string, args: unknown, trace?: TraceCarrier[], deadline?: number): Promise<unknown>
  /** The content digest of the model it serves, when it has one (workers check batches against it). */
  digest(): string | undefined
}

/**
 * What every runner is to the server, the /v2 repository, metrics and the CLI. The members every
 * runner has are required; what only some can do is an optional, typed capability — present or
 * absent, never found by sniffing for methods (a service can hold another copy of the runner
 * classes — the compiled one beside sources in tests — so `instanceof` cannot tell either).
 *
 * @example
 * for (const r of definition.runners) if (r.versions) await r.versions.swap('model:2')
 */
export interface Runner {
  readonly name: string
  readonly kind: RunnerKind
  start(): Promise<void>
  /** Finishes what is queued (graceful shutdown loses nothing accepted), then stops the workers. */
  stop(): Promise<void>
  ready(): boolean
  /** Why it is not ready, beyond starting up (e.g. Redis unreachable); shown by /readyz. */
  notReadyReason(): string | undefined
  /** Operator overrides from a serve config file and BUNDLE_RUNNER_* variables, before start. */
  configure(overrides: RunnerOverrides): void
  /** What it runs with: once started, the running generation's real settings (GET /runners). */
  effectiveConfig(): Record<string, unknown>
  /** Before start: batches, waits and rejections feed the server's /metrics. */
  attachMetrics(metrics: RunnerMetrics): void
  /** Before start: what the runner reports goes to the server's log. */
  attachLog?(log: RunnerLog): void
  /** Rows waiting per method. */
  queueDepth(): Record<string, number>
  /** The batcher's live state (queue, in flight, the batch size it aims for), for GET /runners. */
  stats(): DispatcherStats | undefined
  health(): RunnerHealth

  /** Swappable, pinnable model versions (onnx runners). */
  readonly versions?: RunnerVersions
  /** Batches on remote workers (onnx and custom runners). */
  readonly remote?: RunnerRemote
  /** The model as the Open Inference Protocol (/v2) serves it, once started. */
  inference?(): InferenceModel | undefined
  /** Before start: the server's Redis (--redis), for runners that keep a response cache. */
  useRedis?(link: RedisLink): void
  /** Ensembles: the server hands over how to find the models it hosts. */
  bind?(resolver: (name: string, version?: string) => InferenceModel): void
}

/** A runner the /v2 repository can load, swap and unload: versions and a /v2 model. */
export interface VersionedRunner extends Runner {
  readonly versions: RunnerVersions
  inference(): InferenceModel | undefined
}

export const isVersioned = (r: Runner): r is VersionedRunner => r.versions !== undefined && r.inference !== undefined
