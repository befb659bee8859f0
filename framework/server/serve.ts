import { randomUUID } from 'node:crypto'
import type { AddressInfo, Socket } from 'node:net'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createAdaptorServer, getRequestListener } from '@hono/node-server'
import { WebSocketServer } from 'ws'
import { Counter, Gauge } from 'prom-client'
import { BundleError, isBundleError } from '../../errors/index.js'
import { createServiceApp, type AppOptions, type ServiceApp } from './app.js'
import { startGrpcServer, type GrpcServer } from './grpc/server.js'
import { lingerOnClose } from './linger.js'
import { pendingBytes, responseStarted, stopListening } from './node-internals.js'
import { startTracing, stopTracing, tracingSettings } from '../../runners/index.js'
import type { ServiceDefinition } from '../service/definition.js'

export interface ServeOptions extends AppOptions {
  /** Default 3000; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1: only this machine. Containers pass 0.0.0.0. */
  host?: string
  /** How long shutdown waits for in-flight requests. Default 30 000 ms. */
  graceMs?: number
  /**
   * On shutdown, how long to keep accepting connections after readiness drops, answering new
   * requests 503 with `Connection: close` and `Retry-After` while load balancers stop sending
   * (Kubernetes removes an endpoint a moment after the pod is told to stop). Default 0: only
   * the connections already waiting to be accepted are taken and answered.
   */
  drainDelayMs?: number
  /** A client must send all its headers within this (default 15 000 ms); guards against slowloris. */
  headersTimeoutMs?: number
  /** A client must send its whole request, body included, within this (default 60 000 ms). */
  requestTimeoutMs?: number
  /** An idle keep-alive connection closes after this (default 5 000 ms; Node.js adds 1 s of slack). */
  keepAliveTimeoutMs?: number
  /** A client that accepts no byte of a response for this long is disconnected (default 60 000 ms). */
  sendTimeoutMs?: number
  /** Most open connections; more are closed at once (default: the open-file limit less 256; 0 = no cap). */
  maxConnections?: number
  /** Largest request line plus headers in bytes (default 16 KiB): 431 past it. */
  maxHeaderBytes?: number
  /** Handle SIGTERM/SIGINT (default true): drain, run shutdown hooks, exit 0. */
  handleSignals?: boolean
  /**
   * Serve the Open Inference Protocol over gRPC on this port too (0 picks a free one), on the
   * same host. Default: off.
   */
  grpcPort?: number
  /**
   * Send OpenTelemetry traces to this OTLP/HTTP collector (its base URL, e.g.
   * http://localhost:4318). Without it, OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_*
   * variables) decide; with neither, tracing is off. See docs/operations.md "Traces". Tracing
   * is process-wide: the first server of a process to start it sets it up, and its close stops it.
   */
  otelEndpoint?: string
}

export interface RunningServer {
  service: ServiceApp
  server: Server
  url: string
  /** `grpc://host:port` when the server speaks gRPC too. */
  grpcUrl?: string
  /** Graceful stop: refuse new connections, finish in-flight requests, run shutdown hooks. */
  close(): Promise<void>
}

/**
 * The soft open-file limit less 256 descriptors kept for runners, Redis, the store and logs (Linux; elsewhere no cap).
 */
function defaultMaxConnections(): number {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    return m ? Math.max(64, Number(m[1]) - 256) : 0
  } catch {
    return 0
  }
}

const asked = Symbol('asked')
const stallSince = Symbol('stallSince')
const stallPending = Symbol('stallPending')

/**
 * Whether a connection has had response bytes waiting to go out, none of them leaving, for
 * `limit` ms. Pending bytes are node's write buffer plus libuv's queue (which shrinks with every
 * partial write), so a slow reader that keeps reading is progress, not a stall.
 */
function stalled(
  socket: Socket & { [stallSince]?: number; [stallPending]?: number },
  now: number,
  limit: number,
): boolean {
  const pending = pendingBytes(socket)
  if (pending === 0 || pending !== socket[stallPending]) {
    socket[stallPending] = pending
    socket[stallSince] = now
    return false
  }
  return now - socket[stallSince]! >= limit
}

/** Why the socket could not open, as a coded error naming the address. */
/** A URL as the log shows it: no user, password or query (where tokens go). */
function shownUrl(url: string): string {
  const u = new URL(url)
  u.username = ''
  u.password = ''
  u.search = ''
  return u.href
}

function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  if (err.code === 'EADDRINUSE')
    return new BundleError(
      'E_ADDRESS_IN_USE',
      `port ${port} on ${host} is already in use by another process; stop it or pass another --port (PORT)`,
      { cause: err },
    )
  if (err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') {
    return new BundleError(
      'E_ADDRESS_NOT_AVAILABLE',
      `cannot listen on ${host}:${port} (${err.code}): ${
        err.code === 'EACCES' ? 'ports below 1024 need privileges' : "that address is not one of this machine's"
      }; pass another --host or --port`,
      { cause: err },
    )
  }
  return err
}

/** How long shutdown waits for a connection just accepted to send its request (then it is closed). */
const FIRST_REQUEST_MS = 1_000
/** The listener closes once no client has connected for this long (clients told 503 wait or leave)… */
const QUIET_MS = 20
/** …or after this much, for clients that connect again the instant they are refused. */
const QUIET_MAX_MS = 500

/**
 * The listener's end, without resetting a client: accepts for `drainDelayMs` (new requests are
 * answered 503 by then), then until no client has connected for QUIET_MS (capped at
 * QUIET_MAX_MS), stops listening, and gives each connection that has asked nothing yet a moment
 * to send its request, which is answered 503 with Connection: close. A client that connects in
 * the instant the listener closes is reset by the kernel (it was in the listen backlog): closing
 * when clients have gone quiet makes that rare. Resolves with the promise that the last
 * connection has closed.
 */
async function stopAccepting(
  server: Server,
  connections: Set<Socket & { [asked]?: true }>,
  drainDelayMs: number,
  accepted: () => number,
): Promise<{ done: Promise<void> }> {
  if (drainDelayMs > 0) await new Promise((r) => setTimeout(r, drainDelayMs))
  const giveUp = performance.now() + QUIET_MAX_MS
  for (let seen = -1; seen !== accepted() && performance.now() < giveUp; ) {
    seen = accepted()
    await new Promise((r) => setTimeout(r, QUIET_MS))
  }
  // The backlog's last arrivals: a turn with a poll phase in it, where libuv accepts them.
  await new Promise((r) => setImmediate(r))
  const done = stopListening(server)
  const fresh = [...connections].filter((s) => s[asked] !== true && !s.destroyed)
  if (fresh.length > 0) {
    // Its request reaches the app (503, Connection: close) and the response's end closes it.
    const waiting = new Map<Socket, () => void>()
    const onRequest = (req: IncomingMessage): void => waiting.get(req.socket)?.()
    server.on('request', onRequest)
    let timer: NodeJS.Timeout | undefined
    const asks = fresh.map(
      (s) =>
        new Promise<void>((resolve) => {
          waiting.set(s, resolve)
          s.once('close', () => resolve())
        }),
    )
    await Promise.race([Promise.all(asks), new Promise((r) => (timer = setTimeout(r, FIRST_REQUEST_MS)))])
    clearTimeout(timer)
    server.off('request', onRequest)
  }
  return { done }
}

/**
 * Serves a service on a socket. Listens first (so /livez answers and /readyz says 503 while
 * start-up hooks run), then starts the service.
 */
export async function serve(definition: ServiceDefinition, options: ServeOptions = {}): Promise<RunningServer> {
  const service = createServiceApp(definition, options)
  // Settings are checked before the socket opens: a bad one fails the start with one coded
  // line, never after a "listening" line.
  service.configure()
  const tracing = tracingSettings({ endpoint: options.otelEndpoint, serviceName: definition.name })
  // Slow clients: a client gets 15 s to send its headers and 60 s for the whole request, so
  // trickling connections cannot pile up; idle keep-alive sockets close after 5 s. Node checks
  // these deadlines every connectionsCheckingInterval, so keep it well below them.
  const ms = (name: string, v: number | undefined, fallback: number): number => {
    if (v === undefined) return fallback
    if (!Number.isFinite(v) || v <= 0)
      throw new BundleError('E_SERVE_CONFIG_INVALID', `${name} must be a positive number of milliseconds, got ${v}`)
    return v
  }
  const headersTimeout = ms('headersTimeoutMs', options.headersTimeoutMs, 15_000)
  const requestTimeout = Math.max(ms('requestTimeoutMs', options.requestTimeoutMs, 60_000), headersTimeout)
  const sendTimeout = ms('sendTimeoutMs', options.sendTimeoutMs, 60_000)
  const keepAliveTimeout = ms('keepAliveTimeoutMs', options.keepAliveTimeoutMs, 5_000)
  const honoListener = getRequestListener(service.app.fetch)
  // API routes go straight to the app's fast path (no web Request/Response objects); every
  // other route, and all of them with CORS on, through hono.
  const fast = service.fastPath
  const serverOptions = {
    headersTimeout,
    requestTimeout,
    keepAliveTimeout,
    connectionsCheckingInterval: Math.min(1_000, Math.ceil(headersTimeout / 4)),
    maxHeaderSize: options.maxHeaderBytes ?? 16 * 1024,
  }
  const listenerOf = (hono: typeof honoListener) =>
    fast === undefined ? hono : (req: IncomingMessage, res: ServerResponse) => void (fast(req, res) || hono(req, res))
  // With WebSocket routes, node-server's adaptor wires the upgrade to hono's WebSocket helper
  // (through a `ws` server that caps the message size); the request listener stays ours.
  const server: Server = service.websocket
    ? (createAdaptorServer({
        fetch: service.app.fetch,
        serverOptions,
        createServer: ((o: typeof serverOptions, hono: typeof honoListener) =>
          createServer(o, listenerOf(hono))) as never,
        websocket: {
          server: new WebSocketServer({ noServer: true, maxPayload: service.websocket.maxMessageBytes }),
        },
      }) as Server)
    : createServer(serverOptions, listenerOf(honoListener))
  // Past this many connections node closes new ones at once: the process keeps file
  // descriptors for its runners, Redis, the store and logs however many clients come.
  const maxConnections = options.maxConnections ?? defaultMaxConnections()
  if (maxConnections > 0) server.maxConnections = maxConnections
  const closedEarly = new Counter({
    name: 'bundle_http_connections_closed_total',
    help:
      'Connections the server closed on a client: slow_request (headers or body not in time), send_stalled ' +
      '(not reading its response), max_connections (over the cap)',
    labelNames: ['service', 'reason'],
    registers: [service.metrics.registry],
  })
  for (const reason of ['slow_request', 'send_stalled', 'max_connections'])
    closedEarly.labels(definition.name, reason).inc(0)
  new Gauge({
    name: 'bundle_http_connections_open',
    help: 'Open client connections',
    labelNames: ['service'],
    registers: [service.metrics.registry],
    collect() {
      return new Promise<void>((resolve) =>
        server.getConnections((err, n) => (err ? undefined : this.labels(definition.name).set(n), resolve())),
      )
    },
  })
  server.on('drop', () => closedEarly.labels(definition.name, 'max_connections').inc())
  // Count responses until their last byte is handed to the socket: the app's own in-flight
  // count drops when a handler returns, before the response is written.
  // One shared listener, no closure or Set entry per response: on a small call those showed.
  let open = 0
  let onIdle: (() => void) | undefined
  const responseClosed = (): void => {
    open--
    if (open === 0) onIdle?.()
  }
  server.on('request', (_req, res) => {
    open++
    res.on('close', responseClosed)
  })
  // Stalls are watched per connection (a response's unsent bytes sit in its socket); shutdown
  // waits for connections accepted but not yet asked anything (`asked` unset).
  const connections = new Set<Socket & { [asked]?: true }>()
  let accepted = 0
  server.on('connection', (socket: Socket) => {
    accepted++
    lingerOnClose(socket)
    connections.add(socket)
    socket.once('close', () => connections.delete(socket))
  })
  server.prependListener('request', (req: IncomingMessage) => {
    ;(req.socket as Socket & { [asked]?: true })[asked] = true
  })
  const responsesDone = (): Promise<void> =>
    open === 0 ? Promise.resolve() : new Promise<void>((resolve) => (onIdle = resolve))
  // A client that stops reading its response would hold the connection and the response's
  // bytes forever (node has no send timeout): drop it once no byte has left for sendTimeout.
  const sweep = setInterval(
    () => {
      const now = Date.now()
      for (const socket of connections)
        if (stalled(socket, now, sendTimeout)) {
          closedEarly.labels(definition.name, 'send_stalled').inc()
          service.log.info(
            { reason: 'send_stalled', sendTimeoutMs: sendTimeout },
            'client stopped reading its response; connection closed',
          )
          socket.destroy()
        }
    },
    Math.min(1_000, Math.ceil(sendTimeout / 4)),
  )
  sweep.unref()
  await new Promise<void>((resolve, reject) => {
    const failed = (err: Error) => {
      clearInterval(sweep) // no server, nothing to sweep
      reject(listenError(err, options.host ?? '127.0.0.1', options.port ?? 3000))
    }
    server.once('error', failed)
    server.listen(options.port ?? 3000, options.host ?? '127.0.0.1', () => {
      server.off('error', failed)
      resolve()
    })
  })
  // Errors node answers before the app sees the request (malformed HTTP, headers too large,
  // headers or request not in time) get the same JSON shape as every other error.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
    if (timedOut) closedEarly.labels(definition.name, 'slow_request').inc()
    // Nothing to write to a gone client, or after a response has started (its bytes would corrupt it).
    if (err.code === 'ECONNRESET' || !socket.writable || responseStarted(socket as Socket)) return void socket.destroy()
    const [status, text, code, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [
            431,
            'Request Header Fields Too Large',
            'E_HTTP_HEADERS_TOO_LARGE',
            `the request line and headers are larger than ${options.maxHeaderBytes ?? 16 * 1024} bytes`,
          ]
        : timedOut
          ? [
              408,
              'Request Timeout',
              'E_HTTP_REQUEST_TIMEOUT',
              `the request was not received in time (headers within ${headersTimeout} ms, all of it within ` +
                `${requestTimeout} ms)`,
            ]
          : [400, 'Bad Request', 'E_INPUT_INVALID', 'the request is not valid HTTP']
    const requestId = randomUUID()
    const body = JSON.stringify({ error: { code, message, requestId } })
    // Write the answer, then drop the connection: a client trickling headers must not keep it.
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ` +
        `${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    )
    // A write the client does not read must not keep the socket either.
    setTimeout(() => socket.destroy(), 1_000).unref()
    service.log.info({ status, requestId, reason: err.code }, 'request refused by the HTTP parser')
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${host}:${address.port}`
  service.log.info({ url }, 'listening')
  let grpc: GrpcServer | undefined
  if (options.grpcPort !== undefined) {
    try {
      grpc = await startGrpcServer({
        ...service.protocol,
        port: options.grpcPort,
        host: options.host ?? '127.0.0.1',
        registry: service.metrics.registry,
        service: definition.name,
      })
    } catch (err) {
      // The HTTP socket is open already: close it, so a failed start leaves nothing listening.
      clearInterval(sweep)
      await new Promise<void>((resolve) => server.close(() => resolve()))
      throw err
    }
  }
  service.log.flush()

  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      const graceMs = options.graceMs ?? 30_000
      const drainDelayMs = options.drainDelayMs ?? 0
      service.log.info({ inFlight: service.inFlight(), graceMs, drainDelayMs }, 'shutting down')
      // The send-stall sweep goes on until the last connection is closed: a client that stopped
      // reading must not hold the shutdown for the whole grace period.
      service.drain() // /readyz and new requests answer 503 from now on, each with Connection: close
      const grpcClosed = grpc?.close(graceMs + drainDelayMs)
      const closed = await stopAccepting(server, connections, drainDelayMs, () => accepted)
      server.closeIdleConnections()
      let timer: NodeJS.Timeout | undefined
      const graceOver = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), graceMs)))
      // Wait for every response to be written and every API call to end (a timed-out call may
      // still be running), up to the grace period.
      const outcome = await Promise.race([
        responsesDone()
          .then(() => service.idle())
          .then(() => 'idle' as const),
        graceOver,
      ])
      clearTimeout(timer)
      if (outcome === 'timeout')
        service.log.warn({ inFlight: service.inFlight() }, 'grace period over; closing remaining connections')
      for (const [sig, fn] of signalHandlers) process.off(sig, fn)
      await grpcClosed
      try {
        await service.stop()
      } finally {
        // Whatever a shutdown hook did, no connection is left open.
        server.closeAllConnections()
        clearInterval(sweep)
        await closed.done
        // The last requests' spans (the workers sent theirs as they stopped).
        await stopTracing()
        service.log.info('stopped')
        await new Promise<void>((resolve) => service.log.flush(() => resolve()))
      }
    })())

  const signalHandlers: [NodeJS.Signals, (s: NodeJS.Signals) => void][] = []

  if (options.handleSignals !== false) {
    // Node as PID 1 in a container has no default SIGTERM handling: without this it never exits.
    const onSignal = (signal: NodeJS.Signals): void => {
      service.log.info({ signal }, 'signal received')
      service.log.flush()
      close().then(
        () => process.exit(0),
        (err) => {
          service.log.error({ err }, 'shutdown failed')
          process.exit(1)
        },
      )
    }
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.once(sig, onSignal)
      signalHandlers.push([sig, onSignal])
    }
  }

  try {
    // Before the runners start: their workers are told to trace too.
    if (tracing) {
      await startTracing(tracing, { 'bundle.process': 'api-server' })
      service.log.info({ url: shownUrl(tracing.url), protocol: tracing.protocol }, 'sending traces')
    }
    await service.start()
    service.log.flush()
  } catch (err) {
    // An expected failure (a model not in the store, a runner that cannot start) is one line
    // with its code; only the unexpected get a stack in the log.
    if (isBundleError(err)) service.log.error({ code: err.code }, `start-up failed: ${err.message}`)
    else service.log.error({ err }, 'start-up failed')
    await close()
    throw err
  }
  return { service, server, url, ...(grpc ? { grpcUrl: `grpc://${host}:${grpc.port}` } : {}), close }
}
