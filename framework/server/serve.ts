import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { BundleError, isBundleError } from '../../errors/index.js'
import { startTracing, tracingSettings, type TracingSettings } from '../../runners/index.js'
import type { ServiceDefinition } from '../service/definition.js'
import { createServiceApp, type ServiceApp } from './app.js'
import { answerClientErrors } from './http/client-errors.js'
import { type Connections, watchConnections } from './http/connections.js'
import { httpServer, timeoutsOf } from './http/http-server.js'
import type { ServeOptions } from './http/options.js'
import type { Listening } from './part.js'
import { shutDown } from './http/shutdown.js'
import { exitOnSignals } from './http/signals.js'

export type { ServeOptions } from './http/options.js'

export interface RunningServer {
  service: ServiceApp
  server: Server
  url: string
  /** `grpc://host:port` when the server speaks gRPC too. */
  grpcUrl?: string
  /** Graceful stop: refuse new connections, finish in-flight requests, run shutdown hooks. */
  close(): Promise<void>
}

/** A URL as the log shows it: no user, password or query (where tokens go). */
function shownUrl(url: string): string {
  const u = new URL(url)
  u.username = ''
  u.password = ''
  u.search = ''
  return u.href
}

/** Why the socket could not open, as a coded error naming the address. */
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

/** Opens the socket; answers the URL it serves at. */
async function listen(server: Server, host: string, port: number): Promise<{ url: string; host: string }> {
  await new Promise<void>((resolve, reject) => {
    const failed = (err: Error) => reject(listenError(err, host, port))
    server.once('error', failed)
    server.listen(port, host, () => {
      server.off('error', failed)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return { url: `http://${shown}:${address.port}`, host: shown }
}

/** The parts on ports of their own (gRPC); a failed start closes what opened, so nothing is left listening. */
async function listenPorts(
  service: ServiceApp,
  host: string,
  server: Server,
  connections: Connections,
): Promise<Listening[]> {
  const open: Listening[] = []
  try {
    for (const part of service.ports) open.push(await part.listen(host))
    return open
  } catch (err) {
    await Promise.all(open.map((l) => l.close(0)))
    connections.stopSweep()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    throw err
  }
}

/** Tracing, then the service's start-up hooks and runners; a failure is logged (one line when coded) and shuts down. */
async function startService(
  service: ServiceApp,
  tracing: TracingSettings | undefined,
  close: () => Promise<void>,
): Promise<void> {
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
  const timeouts = timeoutsOf(options)
  const server = httpServer(service, options, timeouts)
  const connections = watchConnections(server, service, definition.name, timeouts.sendTimeout)
  const host = options.host ?? '127.0.0.1'
  const port = options.port ?? 3000
  const { url } = await listen(server, host, port).catch((err: unknown) => {
    connections.stopSweep() // no server, nothing to sweep
    throw err
  })
  answerClientErrors(server, service, connections, options.maxHeaderBytes ?? 16 * 1024, timeouts)
  service.log.info({ url }, 'listening')
  const ports = await listenPorts(service, host, server, connections)
  service.log.flush()
  let closing: Promise<void> | undefined
  let quitSignals: (() => void) | undefined
  const close = (): Promise<void> =>
    (closing ??= shutDown({
      server,
      service,
      connections,
      ports,
      graceMs: options.graceMs ?? 30_000,
      drainDelayMs: options.drainDelayMs ?? 0,
      onDrained: () => quitSignals?.(),
    }))
  if (options.handleSignals !== false) quitSignals = exitOnSignals(service, close)
  await startService(service, tracing, close)
  const grpc = ports[service.ports.findIndex((part) => part.name === 'grpc')]
  return { service, server, url, ...(grpc ? { grpcUrl: grpc.url } : {}), close }
}
