import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Hono, type Context } from 'hono'
import pino, { type Logger } from 'pino'
import { BundleError, isBundleError } from '../../errors/index.js'
import { mediaTypeMatches, type HeaderReader } from '../io/types.js'
import type { ApiDefinition, ServiceDefinition } from '../service/definition.js'
import { isOpenPath, keyChecker } from './auth.js'
import { DEFAULT_MAX_BODY_BYTES } from './body.js'
import { corsMiddleware } from './cors.js'
import { Deadlines, type Deadline } from './deadlines.js'
import { docsAsset, docsPage } from './docs.js'
import { errorAnswer, errorResponse } from './error-response.js'
import { BodyOf, ExchangeHeaders, honoExchange, nodeExchange, type Answer, type Exchange } from './exchange.js'
import { envOverrides, mergeOverrides, queueName, RunnerMetrics, undeclaredRunners, withCallContext, type RedisLink, type RunnerOverrides, type StageTimes } from '../../runners/index.js'
import { callOptions, refusalDue, refuseEarly } from './call-options.js'
import { accessLog } from './access-log.js'
import { LogSink } from './log-sink.js'
import { createMetrics, type ServerMetrics } from './metrics.js'
import { openapiDocument } from './openapi.js'
import { frameworkVersion, headerOf, RequestContext, SANE_REQUEST_ID } from './request.js'
import { ModelRepository } from './v2/repository.js'
import { TaskService } from './tasks.js'
import { decodeBody } from './v2/encoding.js'
import { mountV2, v2Error } from './v2/routes.js'

export interface AppOptions {
  /** Require `Authorization: Bearer <key>` on every route but probes, metrics, docs and read-only metadata (see auth.ts). */
  apiKey?: string
  /** Origins browsers may call this server from (CORS); `*` for any. Default none: CORS off. */
  corsOrigins?: readonly string[]
  /** Largest request body in bytes (default 32 MiB). */
  maxBodyBytes?: number
  logger?: Logger
  /** One log line per request (default true; BUNDLE_ACCESS_LOG=0 turns it off). */
  accessLog?: boolean
  /**
   * A Server-Timing header on API answers: where the request's time went (body read, decode,
   * runner queue, transfer and compute, the method, encode). Default off; BUNDLE_SERVER_TIMING=1.
   */
  serverTiming?: boolean
  /** Runner overrides keyed by runner name (a serve config file's `runners:`); env wins over these. */
  runnerConfig?: Record<string, RunnerOverrides>
  /** Shown in OpenAPI `info.version`. */
  version?: string
  /** Model store the repository extension loads from (default $BUNDLE_HOME). */
  storeHome?: string
  /** Redis (--redis): response caches and tasks use it. */
  redis?: RedisLink
  /** Names queues in Redis (tasks): the bundle or service (default the service name). */
  scope?: string
  /**
   * Runners send their batches to remote workers through this Redis; queues are named after
   * `scope` (bundle or service). `graceMs`: while no worker is live, how long a batch waits for
   * one before 503 E_REMOTE_NO_WORKERS (default 2 000; 0 = at once).
   */
  remote?: { link: RedisLink; scope: string; graceMs?: number }
}

export type Phase = 'starting' | 'ready' | 'draining' | 'stopped' | 'failed'

export interface ServiceApp {
  readonly app: Hono
  readonly definition: ServiceDefinition
  readonly metrics: ServerMetrics
  readonly log: Logger
  phase(): Phase
  /**
   * Applies operator overrides (config file, BUNDLE_RUNNER_*) to the runners and checks what the
   * service needs of the server (Redis for tasks), throwing E_SERVE_CONFIG_INVALID on the first
   * problem. serve() calls it before it listens, so a bad setting never gets a socket; start()
   * calls it too. Runs once.
   */
  configure(): void
  /** Creates the instance, runs start-up hooks and starts runners; /readyz turns 200 after. */
  start(): Promise<void>
  /** /readyz turns 503 and new API requests are refused; in-flight ones continue. */
  drain(): void
  inFlight(): number
  /** Resolves when no API request is in flight. */
  idle(): Promise<void>
  /** Runs shutdown hooks and stops runners. */
  stop(): Promise<void>
  /**
   * For serve(): answers an API request straight from node's HTTP server and returns true, or
   * returns false (any other route, method) for the hono app to answer. Absent with CORS on.
   */
  readonly fastPath?: (req: IncomingMessage, res: ServerResponse) => boolean
}

/**
 * Server-Timing (W3C): read = receiving the body, decode = turning it into the API's input,
 * method = the API method (runner calls included: their queue, transfer and compute are also
 * given apart), encode = the output into bytes, total = all of it.
 */
function timingHeader(started: number, read: number, decoded: number, ran: number, encoded: number, stages: StageTimes | undefined): string {
  const d = (name: string, ms: number) => `${name};dur=${ms.toFixed(3)}`
  const parts = [d('read', read - started), d('decode', decoded - read), d('method', ran - decoded)]
  // Only for requests that called a runner.
  if (stages && stages.computeMs + stages.queueMs + stages.transferMs > 0) parts.push(d('queue', stages.queueMs), d('transfer', stages.transferMs), d('compute', stages.computeMs))
  parts.push(d('encode', encoded - ran), d('total', encoded - started))
  return parts.join(', ')
}

const INFRA_PATHS = ['/livez', '/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', '/runners']

/**
 * Builds the hono app for a service. HTTP tests call `app.request()`; `serve()` puts it on a
 * socket. Every API request goes: auth → readiness → media type → body limit (no concurrency
 * slot is held while a body arrives) → concurrency → decode/validate → method (with timeout) →
 * encode, and ends in exactly one response.
 */
export function createServiceApp(definition: ServiceDefinition, options: AppOptions = {}): ServiceApp {
  // Buffered stdout (64 KiB or 250 ms, whichever first; see LogSink): a write(2) per access
  // line costs more than handling a small request. serve() flushes after lifecycle lines and at shutdown.
  const sink = options.logger ? undefined : new LogSink(1)
  const log = options.logger ?? pino({ level: process.env.BUNDLE_LOG_LEVEL ?? 'info', base: { service: definition.name } }, sink)
  const logAccess = accessLog(log, sink, definition.name)
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const metrics = createMetrics(definition.name, definition.apis.map((a) => a.name))
  // Runner series cover the service's runners and the models loaded at run time (/v2/repository).
  let repository: ModelRepository | undefined
  // Ensembles have no queue or workers of their own: their steps' runners publish them.
  const runnerMetrics = new RunnerMetrics(metrics.registry, definition.name, () => [...definition.runners.filter((r) => r.kind !== 'ensemble'), ...(repository?.loaded() ?? [])])
  for (const r of definition.runners) r.attachMetrics(runnerMetrics)
  repository = new ModelRepository(definition.runners, { ...(options.storeHome ? { home: options.storeHome } : {}), attach: (r) => r.attachMetrics(runnerMetrics) })
  const checkKey = options.apiKey ? keyChecker(options.apiKey) : undefined
  const accessLogOn = options.accessLog ?? process.env.BUNDLE_ACCESS_LOG !== '0'
  const serverTiming = options.serverTiming ?? process.env.BUNDLE_SERVER_TIMING === '1'
  let phase: Phase = 'starting'
  let reason = 'starting up'
  let instance: Record<string, unknown> | undefined
  let inFlight = 0
  // Of those, API requests still reading their body.
  let reading = 0
  let starting: Promise<void> | undefined
  let idleWaiters: (() => void)[] = []

  const deadlines = new Deadlines(definition.traffic.timeoutMs)
  const app = new Hono<{ Variables: { requestId: string; headed?: boolean } }>()

  app.use('*', async (c, next) => {
    const given = headerOf(c, 'x-request-id')
    const requestId = given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
    c.set('requestId', requestId)
    const started = performance.now()
    await next()
    // API responses and errors already carry the id in a plain header object (the fast path:
    // a Headers instance costs node-server a sort and a copy); other routes get it here.
    if (!c.get('headed')) c.res.headers.set('x-request-id', requestId)
    // While draining, tell keep-alive clients to reconnect (to another replica).
    if (phase === 'draining') c.res.headers.set('connection', 'close')
    if (accessLogOn) logAccess(c.req.method, c.req.path, c.res.status, Math.round((performance.now() - started) * 100) / 100, requestId)
  })

  // CORS before the key check: a browser's preflight carries no Authorization header.
  const cors = corsMiddleware(options.corsOrigins ?? [])
  if (cors) app.use('*', cors)
  if (checkKey) {
    // One check in front of every route, so a route added later is closed unless auth.ts opens it.
    const apiAt = new Map(definition.apis.filter((a) => !a.task).map((a) => [a.route, a]))
    app.use('*', async (c, next) => {
      const path = c.req.path
      if (!isOpenPath(path)) {
        try {
          checkKey(headerOf(c, 'authorization'))
        } catch (err) {
          const a = c.req.method === 'POST' ? apiAt.get(path) : undefined
          if (a) {
            // Refused calls still count in the endpoint's request metrics.
            const m = metrics.endpoint(a.name)
            m.begin()
            m.end(401, 0)
          }
          if (path === '/v2' || path.startsWith('/v2/')) return v2Error(c, err, log)
          throw err
        }
      }
      await next()
    })
  }

  const runnersReady = (): string | undefined => {
    const r = definition.runners.find((x) => !x.ready())
    if (r === undefined) return undefined
    const why = r.notReadyReason()
    return why ? `${r.name} (${why})` : r.name
  }

  /** Why a started service cannot serve now: a runner, or the tasks' Redis. */
  const notReady = (): string | undefined => {
    const runner = runnersReady()
    if (runner !== undefined) return `runner ${runner} is not ready`
    const t = tasks?.notReadyReason()
    return t === undefined ? undefined : `tasks are not ready (${t})`
  }

  app.get('/livez', (c) => c.json({ status: 'live' }))
  app.get('/healthz', (c) => c.json({ status: 'live' }))
  app.get('/readyz', (c) => {
    const waiting = phase === 'ready' ? notReady() : undefined
    if (phase === 'ready' && waiting === undefined) return c.json({ status: 'ready' })
    return c.json({ status: phase === 'ready' ? 'not ready' : phase, reason: waiting ?? reason }, 503)
  })
  app.get('/runners', (c) =>
    c.json(
      definition.runners.map((r) => {
        const batcher = r.stats()
        return { name: r.name, ready: r.ready(), config: r.effectiveConfig(), ...(batcher ? { batcher } : {}) }
      }),
    ),
  )
  app.get('/metrics', async (c) => c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }))
  const openapi = JSON.stringify(openapiDocument(definition, options.version))
  app.get('/openapi.json', (c) => c.body(openapi, 200, { 'content-type': 'application/json' }))
  app.get('/docs', (c) => c.html(docsPage(definition.name)))
  app.get('/docs/assets/:name', (c) => {
    const asset = docsAsset(c.req.param('name'))
    if (asset === undefined) throw new BundleError('E_HTTP_NOT_FOUND', `no docs asset ${c.req.param('name')}`)
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, { 'content-type': asset.contentType, 'cache-control': 'public, max-age=86400' })
  })
  app.get('/', (c) => c.redirect('/docs'))
  mountV2(app, {
    repository,
    ready: () => phase === 'ready' && notReady() === undefined,
    maxBodyBytes: maxBody,
    version: frameworkVersion(),
    log,
    track: async (fn) => {
      inFlight++
      try {
        return await fn()
      } finally {
        finish()
      }
    },
  })

  const finish = (): void => {
    inFlight--
    if (inFlight === 0) {
      const waiters = idleWaiters
      idleWaiters = []
      for (const w of waiters) w()
    }
  }

  /** The request body's bytes (media type checked, size capped; gzip/deflate expanded within the same cap). */
  async function readInput(ex: Exchange, a: ApiDefinition): Promise<{ contentType: string; bytes: Uint8Array }> {
    const contentType = ex.header('content-type') ?? ''
    if (!mediaTypeMatches(contentType, a.input.mediaTypes)) {
      throw new BundleError('E_HTTP_UNSUPPORTED_MEDIA_TYPE', `${a.route} accepts ${a.input.mediaTypes.join(', ')}; got ${contentType === '' ? 'no Content-Type' : contentType}`)
    }
    const raw = await ex.body(maxBody)
    const encoding = ex.header('content-encoding')
    return { contentType, bytes: encoding === undefined ? raw : await decodeBody(raw, encoding, maxBody) }
  }

  /** The body as the API's input descriptor reads it: at once where the descriptor can (json, text, tensor). */
  function decodeInput(headers: HeaderReader, a: ApiDefinition, { contentType, bytes }: { contentType: string; bytes: Uint8Array }): unknown {
    return a.input.decode(new BodyOf(contentType, headers, bytes))
  }

  const tooMany = (): BundleError => new BundleError('E_HTTP_TOO_MANY_REQUESTS', `the service is handling its maximum of ${definition.traffic.maxConcurrency} concurrent requests; retry later`)
  // The runners each API was seen to call, learned from its requests (a runner call records
  // itself in the request's context): asked whether they would take a request before its body
  // is read. Services without runners skip the request context altogether.
  const apiRunners = new Map(definition.runners.length ? definition.apis.map((a) => [a.name, new Set<object>()] as const) : [])

  /**
   * One API request, start to answer: the pipeline both hono's routes and serve()'s fast path
   * run. `respond` gets the answer, exactly once — at the timeout if the method is still running
   * then. The method may go on: it keeps its concurrency slot (and shutdown waits for it) until
   * it really ends, so timeouts cannot pile up unbounded work. Settles when the method has ended.
   */
  async function handle(ex: Exchange, a: ApiDefinition, requestId: string, respond: (answer: Answer) => void): Promise<void> {
    const started = performance.now()
    const m = metrics.endpoint(a.name)
    let answered = false
    const answer = (x: Answer): void => {
      if (answered) return
      answered = true
      m.end(x.status, (performance.now() - started) / 1000)
      respond(x)
    }
    let deadline: Deadline | undefined
    inFlight++
    m.begin()
    try {
      if (phase !== 'ready' || instance === undefined) throw new BundleError('E_HTTP_NOT_READY', phase === 'starting' ? 'the service is still starting' : `the service is ${phase}`)
      // Requests still receiving their bodies hold no concurrency slot: slow uploads (or a
      // slowloris trickling bodies) cannot lock out fast clients; the request timeout bounds them.
      if (inFlight - reading > definition.traffic.maxConcurrency) throw tooMany()
      const uses = apiRunners.get(a.name)
      const call = uses ? callOptions(ex, a, started, uses) : undefined
      // A request its runners would refuse anyway is refused now, before its body is read:
      // under overload, refusals are most of the work, and this is what keeps them cheap.
      if (call) refuseEarly(uses!, call)
      reading++
      let body: Awaited<ReturnType<typeof readInput>>
      try {
        body = await readInput(ex, a)
      } finally {
        reading--
      }
      if (inFlight - reading > definition.traffic.maxConcurrency) throw tooMany()
      const read = serverTiming ? performance.now() : 0
      // Awaited only when the descriptor needs it: each promise hop shows on a small call.
      const headers = new ExchangeHeaders(ex)
      let input = decodeInput(headers, a, body)
      if (input instanceof Promise) input = await input
      const decoded = serverTiming ? performance.now() : 0
      const method = instance[a.name] as (input: unknown, ctx: unknown) => unknown
      const ctx = new RequestContext(requestId, headers, ex.outgoing)
      const stages: StageTimes | undefined = serverTiming && call ? { queueMs: 0, computeMs: 0, transferMs: 0 } : undefined
      const result = call ? withCallContext({ ...call, gone: () => ctx.gone(), ...(stages ? { timing: stages } : {}) }, () => method.call(instance, input, ctx)) : method.call(instance, input, ctx)
      let output = result
      if (result instanceof Promise) {
        // The timeout answers by itself; the method's own end is awaited as it is (no race).
        deadline = deadlines.add(definition.traffic.timeoutMs, () => {
          ctx.abort(new Error('timeout'))
          answer(errorAnswer(new BundleError('E_HTTP_TIMEOUT', `${a.route} did not finish within ${definition.traffic.timeoutMs} ms`), requestId, log))
        })
        output = await result
        if (answered) return
      }
      const ran = serverTiming ? performance.now() : 0
      let encoded = a.output.encode(output, ex.header('accept'))
      if (encoded instanceof Promise) encoded = await encoded
      const ok: Answer = { status: 200, headers: { 'content-type': encoded.contentType, 'x-request-id': requestId, ...encoded.headers }, body: encoded.body }
      if (serverTiming) ok.headers['server-timing'] = timingHeader(started, read, decoded, ran, performance.now(), stages)
      answer(ok)
    } catch (err) {
      // Failed after its timeout was answered: nothing more to say.
      if (answered) return
      const due = refusalDue(err)
      if (due) await due
      answer(errorAnswer(err, requestId, log))
    } finally {
      if (deadline) deadlines.remove(deadline)
      finish()
    }
  }

  // serve()'s fast path: API routes straight from node's HTTP server, with what the hono
  // middleware does for them (request id, API key, draining, access log). Off with CORS, whose
  // headers only the hono middleware writes.
  const fastRoutes = new Map(definition.apis.filter((a) => !a.task).map((a) => [a.route, a]))
  const fastPath = options.corsOrigins?.length
    ? undefined
    : (req: IncomingMessage, res: ServerResponse): boolean => {
        if (req.method !== 'POST') return false
        const url = req.url ?? ''
        const q = url.indexOf('?')
        const path = q === -1 ? url : url.slice(0, q)
        const a = fastRoutes.get(path)
        if (a === undefined) return false
        const started = performance.now()
        const given = req.headers['x-request-id']
        const requestId = typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID()
        const ex = nodeExchange(req, res)
        const write = (answer: Answer): void => {
          try {
            if (!res.destroyed) {
              const headers = answer.headers
              // A length, not chunked encoding: one write of headers and body, as hono's answers.
              headers['content-length'] = String(typeof answer.body === 'string' ? Buffer.byteLength(answer.body) : answer.body.byteLength)
              // Answered with an error before its body has all arrived (an early refusal, 413,
              // 415): close rather than read the rest only to throw it away, as node would to
              // keep the connection.
              if (phase === 'draining' || (answer.status >= 400 && !req.complete)) headers.connection = 'close'
              res.writeHead(answer.status, headers)
              res.end(answer.body)
            }
            if (accessLogOn) logAccess('POST', path, answer.status, Math.round((performance.now() - started) * 100) / 100, requestId)
          } catch (err) {
            log.error({ err, requestId }, 'could not write the response')
            res.destroy()
          }
        }
        if (checkKey) {
          try {
            checkKey(ex.header('authorization'))
          } catch (err) {
            const m = metrics.endpoint(a.name)
            m.begin()
            m.end(401, 0)
            write(errorAnswer(err, requestId, log))
            return true
          }
        }
        handle(ex, a, requestId, write).catch((err: unknown) => {
          // handle() answers every error itself; this is only for a bug in it, never a hang.
          log.error({ err, requestId }, 'request pipeline failed')
          res.destroy()
        })
        return true
      }

  const taskApis = definition.apis.filter((a) => a.task)
  const redis = options.redis ?? options.remote?.link
  const tasks = taskApis.length && redis ? new TaskService({ link: redis, scope: options.remote?.scope ?? options.scope ?? definition.name, apis: taskApis, log }) : undefined
  tasks?.mount(app, {
    decode: async (c, a) => {
      if (phase !== 'ready' || instance === undefined) throw new BundleError('E_HTTP_NOT_READY', phase === 'starting' ? 'the service is still starting' : `the service is ${phase}`)
      const ex = honoExchange(c)
      return await decodeInput(new ExchangeHeaders(ex), a, await readInput(ex, a))
    },
    respond: (c, err) => errorResponse(err, c.get('requestId') ?? randomUUID(), log),
  })
  for (const a of definition.apis) {
    if (a.task) continue
    app.post(a.route, async (c) => {
      const answer = await new Promise<Answer>((resolve, reject) => void handle(honoExchange(c), a, c.get('requestId'), resolve).catch(reject))
      // Plain header objects: a Headers instance costs node-server a sort and a copy.
      c.set('headed', true)
      return c.body(answer.body as Uint8Array<ArrayBuffer> | string, answer.status as 200, answer.headers)
    })
    app.all(a.route, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${a.route} takes POST`)
    })
  }
  for (const p of INFRA_PATHS) {
    app.all(p, () => {
      throw new BundleError('E_HTTP_METHOD_NOT_ALLOWED', `${p} takes GET`)
    })
  }
  app.notFound((c) => errorResponse(new BundleError('E_HTTP_NOT_FOUND', `no route for ${c.req.method} ${c.req.path}`), c.get('requestId') ?? randomUUID(), log))
  app.onError((err, c) => {
    const allow: Record<string, string> = isBundleError(err) && err.code === 'E_HTTP_METHOD_NOT_ALLOWED' ? { allow: definition.apis.some((a) => a.route === c.req.path) ? 'POST' : 'GET' } : {}
    return errorResponse(err, c.get('requestId') ?? randomUUID(), log, allow)
  })

  let configured = false
  function configure(): void {
    if (configured) return
    // Operators tune runners without touching code: config file, then environment.
    const names = new Set(definition.runners.map((r) => r.name))
    for (const name of Object.keys(options.runnerConfig ?? {})) {
      if (!names.has(name)) throw new BundleError('E_SERVE_CONFIG_INVALID', `the config names runner "${name}", but this service has ${[...names].join(', ') || 'no runners'}`)
    }
    const layers = definition.runners.map((r) => [r, mergeOverrides({}, options.runnerConfig?.[r.name] ?? {}, envOverrides(r.name))] as const)
    if (taskApis.length && tasks === undefined) throw new BundleError('E_SERVE_CONFIG_INVALID', `${taskApis.map((a) => a.route).join(', ')} ${taskApis.length > 1 ? 'are tasks' : 'is a task'}, which live in Redis: serve with --redis redis://HOST:6379 (or BUNDLE_REDIS_URL)`)
    // Every layer parsed before any runner changes: a bad variable leaves every runner as it was.
    for (const [r, overrides] of layers) r.configure(overrides)
    configured = true
  }

  return {
    app: app as unknown as Hono,
    definition,
    metrics,
    log,
    phase: () => phase,
    configure,
    ...(fastPath ? { fastPath } : {}),
    start() {
      starting ??= (async () => {
        try {
          configure()
          const redis = options.redis ?? options.remote?.link
          if (redis) for (const r of definition.runners) r.useRedis?.(redis)
          const remote = options.remote
          if (remote) for (const r of definition.runners) r.remote?.useRemote({ link: remote.link, queue: queueName(remote.scope, r.name), ...(remote.graceMs !== undefined ? { graceMs: remote.graceMs } : {}) })
          instance = definition.create()
          for (const hook of definition.onStartup) await (instance[hook] as () => unknown).call(instance)
          // Ensembles check their steps against the models, so they start after every runner.
          for (const r of definition.runners) if (r.kind !== 'ensemble') await r.start()
          for (const r of definition.runners) if (r.kind === 'ensemble') await r.start()
          await tasks?.start(instance)
          // A SIGTERM during start-up wins: the service never turns ready.
          if (phase !== 'starting') return
          phase = 'ready'
          reason = ''
          if (definition.runners.length) log.info({ runners: Object.fromEntries(definition.runners.map((r) => [r.name, r.effectiveConfig()])) }, 'runner configuration')
          // A runner the service's code uses but does not declare is never started: say so now,
          // not on the first request that calls it.
          for (const r of undeclaredRunners(definition.runners)) {
            log.warn({ runner: r.name }, `runner ${r.name} was created but is not in the runners of service ${definition.name}, so it was not started and every call to it fails with E_RUNNER_NOT_DECLARED; add it: @service({ runners: [...] })`)
          }
          log.info({ apis: definition.apis.map((a) => a.route) }, 'service ready')
        } catch (err) {
          phase = 'failed'
          // /readyz is open to anyone: the code, not the message (which may name files); serve() logs it all.
          reason = `start-up failed${isBundleError(err) ? ` (${err.code})` : ''}; the server log has the details`
          throw err
        }
      })()
      return starting
    },
    drain() {
      if (phase === 'ready' || phase === 'starting') {
        phase = 'draining'
        reason = 'shutting down'
      }
    },
    inFlight: () => inFlight,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    async stop() {
      if (phase !== 'failed') phase = 'draining'
      reason = 'shutting down'
      // Shutdown hooks run after start-up hooks, never beside them.
      await starting?.catch(() => undefined)
      // Every hook and runner gets its turn even if one fails; the first failure is reported.
      let failure: unknown
      const attempt = async (what: string, fn: () => unknown): Promise<void> => {
        try {
          await fn()
        } catch (err) {
          log.error({ err }, `${what} failed during shutdown`)
          failure ??= err
        }
      }
      // Tasks stop first: they may still use what the shutdown hooks release.
      await attempt('tasks', () => tasks?.stop())
      if (instance) for (const hook of definition.onShutdown) await attempt(`shutdown hook ${hook}`, () => (instance![hook] as () => unknown).call(instance))
      for (const r of definition.runners) await attempt(`runner ${r.name}`, () => r.stop())
      await attempt('models loaded at run time', () => repository!.stopAll())
      phase = 'stopped'
      if (failure !== undefined) throw failure
    },
  }
}
