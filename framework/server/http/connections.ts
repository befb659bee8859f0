import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import { Counter, Gauge } from 'prom-client'
import type { ServiceApp } from '../app.js'
import { lingerOnClose } from '../linger.js'
import { pendingBytes } from '../node-internals.js'

const asked = Symbol('asked')
const stallSince = Symbol('stallSince')
const stallPending = Symbol('stallPending')

/** A client connection as the server tracks it. */
export type Connection = Socket & { [asked]?: true; [stallSince]?: number; [stallPending]?: number }

export type EarlyClose = 'slow_request' | 'send_stalled' | 'max_connections'

/** What the server knows of its connections and responses, for the stall sweep and shutdown. */
export interface Connections {
  readonly open: ReadonlySet<Connection>
  /** Connections accepted so far (shutdown waits for it to stop growing). */
  accepted(): number
  /** Whether the connection has sent a request yet. */
  asked(socket: Connection): boolean
  /** Resolves once every response has been handed to its socket. */
  responsesDone(): Promise<void>
  /** Counts a connection the server closed on its client (bundle_http_connections_closed_total). */
  closedEarly(reason: EarlyClose): void
  stopSweep(): void
}

/**
 * Whether a connection has had response bytes waiting to go out, none of them leaving, for
 * `limit` ms. Pending bytes are node's write buffer plus libuv's queue (which shrinks with every
 * partial write), so a slow reader that keeps reading is progress, not a stall.
 */
function stalled(socket: Connection, now: number, limit: number): boolean {
  const pending = pendingBytes(socket)
  if (pending === 0 || pending !== socket[stallPending]) {
    socket[stallPending] = pending
    socket[stallSince] = now
    return false
  }
  return now - socket[stallSince]! >= limit
}

/** The connection series on the service's /metrics; answers how to count an early close. */
function connectionSeries(server: Server, service: ServiceApp, name: string): (reason: EarlyClose) => void {
  const closedEarly = new Counter({
    name: 'bundle_http_connections_closed_total',
    help:
      'Connections the server closed on a client: slow_request (headers or body not in time), send_stalled ' +
      '(not reading its response), max_connections (over the cap)',
    labelNames: ['service', 'reason'],
    registers: [service.metrics.registry],
  })
  for (const reason of ['slow_request', 'send_stalled', 'max_connections']) closedEarly.labels(name, reason).inc(0)
  new Gauge({
    name: 'bundle_http_connections_open',
    help: 'Open client connections',
    labelNames: ['service'],
    registers: [service.metrics.registry],
    collect() {
      return new Promise<void>((resolve) =>
        server.getConnections((err, n) => (err ? undefined : this.labels(name).set(n), resolve())),
      )
    },
  })
  server.on('drop', () => closedEarly.labels(name, 'max_connections').inc())
  return (reason) => closedEarly.labels(name, reason).inc()
}

/** Watches the server's connections and responses: counts, marks, and drops clients that stopped reading. */
export function watchConnections(server: Server, service: ServiceApp, name: string, sendTimeout: number): Connections {
  const closedEarly = connectionSeries(server, service, name)
  // Count responses until their last byte is handed to the socket: the app's own in-flight
  // count drops when a handler returns, before the response is written.
  // One shared listener, no closure or Set entry per response: on a small call those showed.
  let responses = 0
  let onIdle: (() => void) | undefined
  const responseClosed = (): void => {
    responses--
    if (responses === 0) onIdle?.()
  }
  server.on('request', (req: IncomingMessage, res) => {
    ;(req.socket as Connection)[asked] = true
    responses++
    res.on('close', responseClosed)
  })
  const open = new Set<Connection>()
  let accepted = 0
  server.on('connection', (socket: Socket) => {
    accepted++
    lingerOnClose(socket)
    open.add(socket)
    socket.once('close', () => open.delete(socket))
  })
  // A client that stops reading its response would hold the connection and the response's
  // bytes forever (node has no send timeout): drop it once no byte has left for sendTimeout.
  const sweep = setInterval(
    () => {
      const now = Date.now()
      for (const socket of open)
        if (stalled(socket, now, sendTimeout)) {
          closedEarly('send_stalled')
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
  return {
    open,
    accepted: () => accepted,
    asked: (socket) => socket[asked] === true,
    responsesDone: () => (responses === 0 ? Promise.resolve() : new Promise<void>((resolve) => (onIdle = resolve))),
    closedEarly,
    stopSweep: () => clearInterval(sweep),
  }
}
