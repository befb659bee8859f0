import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, statSync, watch } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { Command } from 'commander'
import { BundleError } from '../errors/index.js'
import type { ServeOptions } from '../framework/index.js'
import type { RunnerOverrides } from '../runners/index.js'
import { parseEntry } from './load-service.js'
import { modelFilter, servedModels, storeService } from './serve-models.js'
import { resolveEntry } from './entry.js'
import { followParentUnderNpm } from './follow-parent.js'
import { grpcPort, listenFlags, port, remoteSetup, runtimeFlags, type ServeFlags, serverLimits } from './serve-flags.js'
import { configTrust, trustedKeys } from './signing.js'

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
