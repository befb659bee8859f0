// The flags of `bundle serve`: how each is declared and checked, and the settings they give
// (listening, limits, remote runners). Checked before anything starts: a bad flag never opens a port.
import type { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import type { ServeOptions } from '../framework/index.js'
import { redisUrl } from './entry.js'

export function port(value: string | undefined, fallback = process.env.PORT ?? '3000', flag = 'port'): number {
  const raw = value ?? fallback
  const n = Number(raw)
  if (raw.trim() === '' || !Number.isInteger(n) || n < 0 || n > 65535)
    throw new BundleError('E_CLI_USAGE', `${flag} "${raw}" must be an integer from 0 to 65535`)
  return n
}

/** --grpc-port, else $GRPC_PORT; off when neither is set. */
export function grpcPort(value: string | undefined): number | undefined {
  if (value !== undefined) return port(value, '', '--grpc-port')
  const env = process.env.GRPC_PORT
  return env === undefined || env === '' ? undefined : port(env, '', 'GRPC_PORT')
}

function wholeNumber(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n < min)
    throw new BundleError('E_CLI_USAGE', `${flag} "${value}" must be a whole number ≥ ${min}`)
  return n
}

export interface ServeFlags {
  port?: string
  grpcPort?: string
  host?: string
  apiKey?: string
  corsOrigin?: string[]
  maxBodySize?: string
  maxHeaderSize?: string
  headersTimeout?: string
  requestTimeout?: string
  keepAliveTimeout?: string
  sendTimeout?: string
  maxConnections?: string
  grace?: string
  drainDelay?: string
  config?: string
  accessLog: boolean
  reload: boolean
  runners: string
  redis?: string
  remoteGrace?: string
  remoteScaleToZero?: boolean
  otelEndpoint?: string
  models?: string
  modelControlMode?: string
  trust?: string[]
  memoryBudget?: string
  modelLoadConcurrency?: string
  evictionPolicy?: string
  metricsCompat?: string
  printRoutes?: boolean
}

/** An origin as browsers send it (scheme://host[:port]), or `*`. */
function origin(value: string): string {
  const v = value.trim().replace(/\/+$/, '')
  if (v === '*') return v
  let url: URL | undefined
  try {
    url = new URL(v)
  } catch {
    // reported below
  }
  if (url === undefined || url.origin !== v)
    throw new BundleError(
      'E_CLI_USAGE',
      `--cors-origin "${value}" must be an origin such as https://app.example.com (scheme, host and port only), or *`,
    )
  return v
}

/** The server's limits and timeouts from the flags (validated; only those given). */
export function serverLimits(
  opts: ServeFlags,
): Partial<
  Pick<
    ServeOptions,
    | 'maxBodyBytes'
    | 'maxHeaderBytes'
    | 'headersTimeoutMs'
    | 'requestTimeoutMs'
    | 'keepAliveTimeoutMs'
    | 'sendTimeoutMs'
    | 'maxConnections'
    | 'graceMs'
    | 'drainDelayMs'
    | 'corsOrigins'
  >
> {
  const origins =
    opts.corsOrigin ??
    (process.env.BUNDLE_CORS_ORIGINS ? process.env.BUNDLE_CORS_ORIGINS.split(',').filter((o) => o.trim()) : [])
  const out = {
    maxBodyBytes: wholeNumber('--max-body-size', opts.maxBodySize, 1),
    maxHeaderBytes: wholeNumber('--max-header-size', opts.maxHeaderSize, 1024),
    headersTimeoutMs: wholeNumber('--headers-timeout', opts.headersTimeout, 100),
    requestTimeoutMs: wholeNumber('--request-timeout', opts.requestTimeout, 100),
    keepAliveTimeoutMs: wholeNumber('--keep-alive-timeout', opts.keepAliveTimeout, 100),
    sendTimeoutMs: wholeNumber('--send-timeout', opts.sendTimeout, 100),
    maxConnections: wholeNumber('--max-connections', opts.maxConnections, 0),
    graceMs: wholeNumber('--grace', opts.grace, 0),
    drainDelayMs:
      opts.drainDelay !== undefined
        ? wholeNumber('--drain-delay', opts.drainDelay, 0)
        : wholeNumber('BUNDLE_DRAIN_DELAY_MS', process.env.BUNDLE_DRAIN_DELAY_MS || undefined, 0),
    corsOrigins: origins.length ? origins.map(origin) : undefined,
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined))
}

/** Where it listens and the HTTP limits. */
export function listenFlags(c: Command): Command {
  return c
    .option('-p, --port <port>', 'port to listen on (default $PORT or 3000)')
    .option(
      '--grpc-port <port>',
      'also serve the Open Inference Protocol over gRPC on this port (default $GRPC_PORT; off when neither is set)',
    )
    .option('--host <host>', 'interface to bind (default 127.0.0.1, this machine only; use 0.0.0.0 in containers)')
    .option(
      '--api-key <key>',
      'require Authorization: Bearer <key> on every route but probes, metrics, docs and model metadata (default ' +
        '$BUNDLE_API_KEY)',
    )
    .option(
      '--cors-origin <origin>',
      'let browser pages on this origin call the server (repeatable; * for any; default $BUNDLE_CORS_ORIGINS, ' +
        'comma-separated, else none)',
      (v: string, all: string[] = []) => [...all, v],
    )
    .option(
      '--max-body-size <bytes>',
      'largest request body, gzip/deflate bodies once expanded (default 33554432, 32 MiB)',
    )
    .option('--max-header-size <bytes>', 'largest request line plus headers (default 16384)')
    .option('--headers-timeout <ms>', 'a client must send its headers within this (default 15000)')
    .option('--request-timeout <ms>', 'a client must send its whole request within this (default 60000)')
    .option('--keep-alive-timeout <ms>', 'idle keep-alive connections close after this (default 5000)')
    .option(
      '--send-timeout <ms>',
      'a client that reads none of its response for this long is disconnected (default 60000)',
    )
    .option(
      '--max-connections <n>',
      'most open connections, more are closed at once (default: open-file limit - 256; 0 = no cap)',
    )
    .option('--grace <ms>', 'how long shutdown waits for in-flight requests (default 30000)')
    .option(
      '--drain-delay <ms>',
      'on shutdown, keep accepting this long after /readyz turns 503, answering new requests 503 with ' +
        'Connection: close, so load balancers stop sending first (default $BUNDLE_DRAIN_DELAY_MS or 0)',
    )
}

/** What it serves (--models), how its runners run, and what it reports. */
export function runtimeFlags(c: Command): Command {
  return c
    .option(
      '--models <names>',
      'load these models of the store at start-up and serve them over /v2 (HTTP, and gRPC with --grpc-port): ' +
        'comma-separated names, globs (ocr-*), NAME:VERSION or NAME@RANGE; "*" for the whole store (default ' +
        '$BUNDLE_MODELS)',
    )
    .option(
      '--trust <file>',
      'verify every model against this public key (PEM; repeatable) before it loads: anything unsigned, signed ' +
        'by another key or changed is refused (default $BUNDLE_TRUST, comma-separated; serve.yaml trust:)',
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option(
      '--model-control-mode <mode>',
      'none: load every model --models names at start-up (default); explicit: load none of them until POST ' +
        "/v2/repository/models/NAME/load asks (as Triton's modes)",
      'none',
    )
    .option(
      '--memory-budget <size>',
      'with --models: every model it names is available and loads on its first request; the least recently used ' +
        'idle ones are evicted to keep the whole server under SIZE (e.g. 1.5GiB; default $BUNDLE_MEMORY_BUDGET; ' +
        'docs/memory.md)',
    )
    .option('--model-load-concurrency <n>', 'with --memory-budget: models loading at once (default 2)')
    .option('--eviction-policy <policy>', 'with --memory-budget: lru (default) or tinylfu')
    .option(
      '-c, --config <file>',
      'YAML file of runner overrides keyed by runner name (see docs/runners.md "Tuning runners")',
    )
    .option('--no-access-log', 'do not log one line per request (default: log; or BUNDLE_ACCESS_LOG=0)')
    .option('--reload', 'restart when source files change (development)', false)
    .option('--print-routes', 'print every route the server would answer (method, path, key or open) and exit')
    .option(
      '--runners <where>',
      'local: runner workers are child processes here; remote: batches go to `bundle worker` processes through Redis',
      'local',
    )
    .option('--redis <url>', 'Redis for remote runners, response caches and tasks (default $BUNDLE_REDIS_URL)')
    .option(
      '--remote-grace <ms>',
      'remote runners: while no worker is live, how long a batch waits for one before 503 E_REMOTE_NO_WORKERS ' +
        '(default $BUNDLE_REMOTE_GRACE_MS or 2000; 0 = at once)',
    )
    .option(
      '--remote-scale-to-zero',
      'remote runners: the workers scale to zero (an autoscaler wakes them on the queue): ready with no worker ' +
        'live, a batch waits for one until its deadline (default $BUNDLE_REMOTE_SCALE_TO_ZERO=1)',
    )
    .option(
      '--otel-endpoint <url>',
      'send OpenTelemetry traces over OTLP/HTTP to this collector (e.g. http://localhost:4318; default ' +
        '$OTEL_EXPORTER_OTLP_ENDPOINT; off when neither is set)',
    )
    .option(
      '--metrics-compat <set>',
      "also export Triton's nv_inference_* metrics per model and version on /metrics (triton), from the same " +
        'measurements as the bundle_* series (default $BUNDLE_METRICS_COMPAT; none when neither is set)',
    )
}

/** How the remote runners and Redis are set up from --runners, --redis and --remote-grace (checked). */
export function remoteSetup(opts: ServeFlags): { url: string | undefined; graceMs: number | undefined } {
  if (opts.runners !== 'local' && opts.runners !== 'remote')
    throw new BundleError('E_CLI_USAGE', `--runners must be local or remote, not "${opts.runners}"`)
  if (opts.remoteGrace !== undefined && opts.runners !== 'remote')
    throw new BundleError('E_CLI_USAGE', '--remote-grace applies to remote runners: add --runners remote')
  if (opts.remoteScaleToZero && opts.runners !== 'remote')
    throw new BundleError('E_CLI_USAGE', '--remote-scale-to-zero applies to remote runners: add --runners remote')
  if (opts.remoteScaleToZero && opts.remoteGrace !== undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      '--remote-scale-to-zero and --remote-grace: with workers that scale to zero a batch waits for one until its ' +
        'deadline; give one of them',
    )
  const envZero = process.env.BUNDLE_REMOTE_SCALE_TO_ZERO || undefined
  if (envZero !== undefined && envZero !== '0' && envZero !== '1')
    throw new BundleError('E_CLI_USAGE', `BUNDLE_REMOTE_SCALE_TO_ZERO must be 1 or 0, not "${envZero}"`)
  const toZero = opts.remoteScaleToZero || (opts.remoteGrace === undefined && envZero === '1')
  // The environment's value is checked too, but only where it applies (one image may run both ways).
  const grace =
    opts.runners === 'remote'
      ? (wholeNumber('--remote-grace', opts.remoteGrace, 0) ??
        wholeNumber('BUNDLE_REMOTE_GRACE_MS', process.env.BUNDLE_REMOTE_GRACE_MS || undefined, 0))
      : undefined
  const graceMs = opts.runners === 'remote' && toZero ? Number.POSITIVE_INFINITY : grace
  // Redis: always for remote runners; otherwise when given (response caches, tasks).
  const url =
    opts.runners === 'remote'
      ? redisUrl(opts.redis, '--runners remote')
      : (opts.redis ?? (process.env.BUNDLE_REDIS_URL || undefined))
  return { url, graceMs }
}
