import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { createAdaptorServer } from '@hono/node-server'
import { createServiceApp, type AppOptions, type ServiceApp } from './app.js'
import type { ServiceDefinition } from '../service/definition.js'

export interface ServeOptions extends AppOptions {
  /** Default 3000; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1: only this machine. Containers pass 0.0.0.0. */
  host?: string
  /** How long shutdown waits for in-flight requests. Default 30 000 ms. */
  graceMs?: number
  /** A client must send all its headers within this (default 15 000 ms); guards against slowloris. */
  headersTimeoutMs?: number
  /** A client must send its whole request within this (default 120 000 ms). */
  requestTimeoutMs?: number
  /** Handle SIGTERM/SIGINT (default true): drain, run shutdown hooks, exit 0. */
  handleSignals?: boolean
}

export interface RunningServer {
  service: ServiceApp
  server: Server
  url: string
  /** Graceful stop: refuse new connections, finish in-flight requests, run shutdown hooks. */
  close(): Promise<void>
}

/**
 * Serves a service on a socket. Listens first (so /livez answers and /readyz says 503 while
 * start-up hooks run), then starts the service.
 */
export async function serve(definition: ServiceDefinition, options: ServeOptions = {}): Promise<RunningServer> {
  const service = createServiceApp(definition, options)
  // Slow clients: a client gets 15 s to send its headers and 2 min for the whole request, so
  // trickling connections cannot pile up; idle keep-alive sockets close after 5 s. Node checks
  // these deadlines every connectionsCheckingInterval, so keep it well below them.
  const headersTimeout = options.headersTimeoutMs ?? 15_000
  const requestTimeout = Math.max(options.requestTimeoutMs ?? 120_000, headersTimeout)
  const server = createAdaptorServer({
    fetch: service.app.fetch,
    serverOptions: { headersTimeout, requestTimeout, keepAliveTimeout: 5_000, connectionsCheckingInterval: Math.min(1_000, Math.ceil(headersTimeout / 4)) },
  }) as Server
  // Count responses until their last byte is handed to the socket: the app's own in-flight
  // count drops when a handler returns, before the response is written.
  let open = 0
  let onIdle: (() => void) | undefined
  server.on('request', (_req, res) => {
    open++
    res.once('close', () => {
      open--
      if (open === 0) onIdle?.()
    })
  })
  const responsesDone = (): Promise<void> => (open === 0 ? Promise.resolve() : new Promise<void>((resolve) => (onIdle = resolve)))
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 3000, options.host ?? '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  // Errors node answers before the app sees the request (malformed HTTP, headers too large,
  // header timeout) get the same JSON shape as every other error.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy()
    const [status, text, code] =
      err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'request headers are too large'] : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', 'the request was not received in time'] : [400, 'Bad Request', 'the request is not valid HTTP']
    const requestId = randomUUID()
    const body = JSON.stringify({ error: { code: status === 408 ? 'E_HTTP_TIMEOUT' : 'E_INPUT_INVALID', message: code, requestId } })
    // Write the answer, then drop the connection: a client trickling headers must not keep it.
    socket.end(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`, () => socket.destroy())
    service.log.info({ status, requestId, reason: err.code }, 'request refused by the HTTP parser')
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${host}:${address.port}`
  service.log.info({ url }, 'listening')
  service.log.flush()

  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      const graceMs = options.graceMs ?? 30_000
      service.log.info({ inFlight: service.inFlight(), graceMs }, 'shutting down')
      service.drain()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      let timer: NodeJS.Timeout | undefined
      const graceOver = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), graceMs)))
      // Wait for every response to be written and every API call to end (a timed-out call may
      // still be running), up to the grace period.
      const outcome = await Promise.race([responsesDone().then(() => service.idle()).then(() => 'idle' as const), graceOver])
      clearTimeout(timer)
      if (outcome === 'timeout') service.log.warn({ inFlight: service.inFlight() }, 'grace period over; closing remaining connections')
      for (const [sig, fn] of signalHandlers) process.off(sig, fn)
      try {
        await service.stop()
      } finally {
        // Whatever a shutdown hook did, no connection is left open.
        server.closeAllConnections()
        await closed
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
    await service.start()
    service.log.flush()
  } catch (err) {
    service.log.error({ err }, 'start-up failed')
    await close()
    throw err
  }
  return { service, server, url, close }
}
