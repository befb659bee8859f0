import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, statSync, watch } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import type { ServeOptions } from '../framework/index.js'
import type { RunnerOverrides } from '../runners/index.js'
import { parseEntry } from './load-service.js'
import { modelFilter, servedModels, storeService } from './serve-models.js'
import { redisUrl, resolveEntry } from './entry.js'
import { followParentUnderNpm } from './follow-parent.js'
import { configTrust, trustedKeys } from './signing.js'

function port(value: string | undefined, fallback = process.env.PORT ?? '3000', flag = 'port'): number {
  const raw = value ?? fallback
  const n = Number(raw)
  if (raw.trim() === '' || !Number.isInteger(n) || n < 0 || n > 65535)
    throw new BundleError('E_CLI_USAGE', `${flag} "${raw}" must be an integer from 0 to 65535`)
  return n
}

/** --grpc-port, else $GRPC_PORT; off when neither is set. */
function grpcPort(value: string | undefined): number | undefined {
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

/** --reload: a parent that restarts a plain `serve` child whenever a file next to the entry changes. */
function reloading(entry: string): void {
  const args = process.argv.slice(2).filter((a) => a !== '--reload')
  let child: ChildProcess | undefined
  let restarting = false
  const startChild = (): void => {
    child = spawn(process.execPath, [process.argv[1]!, ...args], { stdio: 'inherit' })
    child.on('exit', () => {
      child = undefined
      if (restarting) {
        restarting = false
        startChild()
      }
    })
  }
  let timer: NodeJS.Timeout | undefined
  const dir = existsSync(entry) && statSync(entry).isDirectory() ? resolve(entry) : dirname(parseEntry(entry).file)
  watch(dir, { recursive: true }, (_event, name) => {
    if (name && /node_modules|\.git\//.test(String(name))) return
    clearTimeout(timer)
    timer = setTimeout(() => {
      process.stderr.write(`change in ${name}: restarting\n`)
      if (child) {
        restarting = true
        child.kill('SIGTERM')
      } else startChild()
    }, 150)
  })
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      if (child) child.once('exit', () => process.exit(0)).kill(sig)
      else process.exit(0)
    })
  }
  startChild()
}

async function readServeConfig(file: string): Promise<{ runners: Record<string, RunnerOverrides>; doc: unknown }> {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    throw new BundleError('E_SERVE_CONFIG_INVALID', `${file}: no such config file`)
  }
  const { parse } = await import('yaml')
  let doc: unknown
  try {
    doc = parse(text)
  } catch (err) {
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`,
    )
  }
  const { parseServeConfig } = await import('../runners/index.js')
  return { runners: parseServeConfig(doc, file), doc }
}

interface ServeFlags {
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
function serverLimits(
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
function listenFlags(c: Command): Command {
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
function runtimeFlags(c: Command): Command {
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

export function serveCommand(): Command {
  const c = new Command('serve')
    .description(
      'serve a service over HTTP: ENTRY is path/to/service.ts[:ClassName], a project directory holding ' +
        'bundle.yaml, a stored bundle (name[:version]) or a bundle directory; or, with --models and no ENTRY, ' +
        "the store's models over the Open Inference Protocol without writing a service",
    )
    .argument('[entry]')
  return runtimeFlags(listenFlags(c)).action(runServe)
}

/** How the remote runners and Redis are set up from --runners, --redis and --remote-grace (checked). */
function remoteSetup(opts: ServeFlags): { url: string | undefined; graceMs: number | undefined } {
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

/** `bundle serve`: every flag checked before anything starts, then the server. */
async function runServe(entry: string | undefined, opts: ServeFlags): Promise<void> {
  const modelPatterns = opts.models ?? (process.env.BUNDLE_MODELS || undefined)
  if (entry === undefined && modelPatterns === undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      'bundle serve needs what to serve: a service (path/to/service.ts, a project directory, a bundle tag) or ' +
        "--models NAMES (e.g. --models '*' for every model in the store)",
    )
  if (opts.reload) {
    if (entry === undefined) throw new BundleError('E_CLI_USAGE', "--reload watches a service's files: give ENTRY")
    followParentUnderNpm()
    return reloading(entry)
  }
  const limits = serverLimits(opts)
  const grpc = grpcPort(opts.grpcPort)
  if (grpc !== undefined && grpc !== 0 && grpc === port(opts.port))
    throw new BundleError('E_CLI_USAGE', `--grpc-port ${grpc} is the HTTP port too: give gRPC a port of its own`)
  const { url, graceMs } = remoteSetup(opts)
  const file = opts.config === undefined ? undefined : await readServeConfig(opts.config)
  const runnerConfig = file?.runners
  const trust = await trustedKeys(opts.trust, process.env, file && configTrust(file.doc, opts.config!))
  const { memorySettings } = await import('../runners/index.js')
  const memory = memorySettings({
    flags: opts,
    env: process.env,
    ...(file ? { file: { doc: file.doc, name: opts.config! } } : {}),
  })
  if (memory && modelPatterns === undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      "--memory-budget bounds the models --models names (a service's own runners stay loaded): add --models",
    )
  if (modelPatterns !== undefined && entry !== undefined && opts.runners === 'remote')
    throw new BundleError(
      'E_CLI_USAGE',
      "--models with --runners remote serves the store's models on `bundle worker --models` processes, without a " +
        'service: drop ENTRY, or serve the service and its models with local runners',
    )
  if (memory && opts.runners === 'remote')
    throw new BundleError(
      'E_CLI_USAGE',
      'with --runners remote the models live on the workers: give the budget to them (bundle worker --models ' +
        'PATTERN --memory-budget SIZE)',
    )
  if (opts.modelControlMode !== 'none' && opts.modelControlMode !== 'explicit')
    throw new BundleError(
      'E_CLI_USAGE',
      `--model-control-mode must be none or explicit, not "${opts.modelControlMode}"`,
    )
  // Models are chosen before anything starts: a pattern that matches nothing never opens a port.
  const chosen = modelPatterns === undefined ? undefined : await servedModels(modelPatterns)
  // Explicit control: the models stay in the store until a load asks for them.
  const models = opts.modelControlMode === 'explicit' ? undefined : chosen
  const { definition, scope } =
    entry === undefined ? { definition: await storeService(), scope: 'models' } : await resolveEntry(entry, trust)
  if (opts.printRoutes) {
    const { printRoutes } = await import('./print-routes.js')
    return void (await printRoutes(definition, { redisUrl: url, grpc: grpc !== undefined }))
  }
  const { serve } = await import('../framework/index.js')
  const link = url === undefined ? undefined : new (await import('../runners/index.js')).RedisLink(url)
  const apiKey = opts.apiKey ?? process.env.BUNDLE_API_KEY
  followParentUnderNpm()
  await serve(definition, {
    port: port(opts.port),
    ...(grpc !== undefined ? { grpcPort: grpc } : {}),
    host: opts.host ?? process.env.HOST ?? '127.0.0.1',
    ...(apiKey ? { apiKey } : {}),
    ...limits,
    ...(opts.accessLog === false ? { accessLog: false } : {}),
    // Checked by the server before it opens a socket (E_SERVE_CONFIG_INVALID, as BUNDLE_METRICS_COMPAT).
    ...(opts.metricsCompat !== undefined
      ? { metricsCompat: opts.metricsCompat as NonNullable<ServeOptions['metricsCompat']> }
      : {}),
    ...(opts.otelEndpoint !== undefined ? { otelEndpoint: opts.otelEndpoint } : {}),
    ...(runnerConfig ? { runnerConfig } : {}),
    ...(models ? { models } : {}),
    ...(memory ? { memory } : {}),
    ...(trust ? { trust } : {}),
    ...(modelPatterns !== undefined ? { servable: modelFilter(modelPatterns) } : {}),
    ...(link ? { redis: link, scope } : {}),
    ...(link && opts.runners === 'remote'
      ? { remote: { link, scope, ...(graceMs !== undefined ? { graceMs } : {}) } }
      : {}),
  })
}
