import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import { stopTracing } from '../../../runners/index.js'
import type { ServiceApp } from '../app.js'
import { stopListening } from '../node-internals.js'
import type { Listening } from '../part.js'
import type { Connections } from './connections.js'

/** How long shutdown waits for a connection just accepted to send its request (then it is closed). */
const FIRST_REQUEST_MS = 1_000
/** The listener closes once no client has connected for this long (clients told 503 wait or leave)… */
const QUIET_MS = 20
/** …or after this much, for clients that connect again the instant they are refused. */
const QUIET_MAX_MS = 500

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * The listener's end, without resetting a client: accepts for `drainDelayMs` (new requests are
 * answered 503 by then), then until no client has connected for QUIET_MS (capped at
 * QUIET_MAX_MS), stops listening, and gives each connection that has asked nothing yet a moment
 * to send its request, which is answered 503 with Connection: close. A client that connects in
 * the instant the listener closes is reset by the kernel (it was in the listen backlog): closing
 * when clients have gone quiet makes that rare. Answers a promise of the last connection's close.
 */
export async function stopAccepting(
  server: Server,
  connections: Connections,
  drainDelayMs: number,
): Promise<{ done: Promise<void> }> {
  if (drainDelayMs > 0) await sleep(drainDelayMs)
  const giveUp = performance.now() + QUIET_MAX_MS
  for (let seen = -1; seen !== connections.accepted() && performance.now() < giveUp; ) {
    seen = connections.accepted()
    await sleep(QUIET_MS)
  }
  // The backlog's last arrivals: a turn with a poll phase in it, where libuv accepts them.
  await new Promise((r) => setImmediate(r))
  const done = stopListening(server)
  await firstRequests(
    server,
    [...connections.open].filter((s) => !connections.asked(s) && !s.destroyed),
  )
  return { done }
}

/** Until each of `fresh` has sent its request (answered 503, Connection: close) or closed; FIRST_REQUEST_MS at most. */
async function firstRequests(server: Server, fresh: Socket[]): Promise<void> {
  if (fresh.length === 0) return
  const waiting = new Map<Socket, () => void>()
  const onRequest = (req: IncomingMessage): void => waiting.get(req.socket)?.()
  server.on('request', onRequest)
  const asks = fresh.map(
    (s) =>
      new Promise<void>((resolve) => {
        waiting.set(s, resolve)
        s.once('close', () => resolve())
      }),
  )
  let timer: NodeJS.Timeout | undefined
  await Promise.race([Promise.all(asks), new Promise((r) => (timer = setTimeout(r, FIRST_REQUEST_MS)))])
  clearTimeout(timer)
  server.off('request', onRequest)
}

export interface Shutdown {
  server: Server
  service: ServiceApp
  connections: Connections
  /** The parts on ports of their own (gRPC), closed with the same grace. */
  ports: readonly Listening[]
  graceMs: number
  drainDelayMs: number
  /** Called once in-flight work is done (or the grace is over), before hooks and runners stop. */
  onDrained?: () => void
}

/**
 * Graceful stop: readiness drops and new requests get 503 (Connection: close, Retry-After); the
 * listener closes without resetting clients (stopAccepting); in-flight requests and API calls
 * finish within the grace period; shutdown hooks and runners stop; every connection is closed.
 */
export async function shutDown(o: Shutdown): Promise<void> {
  const { server, service, connections } = o
  service.log.info({ inFlight: service.inFlight(), graceMs: o.graceMs, drainDelayMs: o.drainDelayMs }, 'shutting down')
  // The send-stall sweep goes on until the last connection is closed: a client that stopped
  // reading must not hold the shutdown for the whole grace period.
  service.drain()
  const portsClosed = Promise.all(o.ports.map((l) => l.close(o.graceMs + o.drainDelayMs)))
  const closed = await stopAccepting(server, connections, o.drainDelayMs)
  server.closeIdleConnections()
  await inFlightDone(service, connections, o.graceMs)
  o.onDrained?.()
  await portsClosed
  try {
    await service.stop()
  } finally {
    // Whatever a shutdown hook did, no connection is left open.
    server.closeAllConnections()
    connections.stopSweep()
    await closed.done
    // The last requests' spans (the workers sent theirs as they stopped).
    await stopTracing()
    service.log.info('stopped')
    await new Promise<void>((resolve) => service.log.flush(() => resolve()))
  }
}

/**
 * Every response written and every API call ended (a timed-out call may still be running), up to
 * the grace period.
 */
async function inFlightDone(service: ServiceApp, connections: Connections, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const graceOver = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), graceMs)))
  const outcome = await Promise.race([
    connections
      .responsesDone()
      .then(() => service.idle())
      .then(() => 'idle' as const),
    graceOver,
  ])
  clearTimeout(timer)
  if (outcome === 'timeout')
    service.log.warn({ inFlight: service.inFlight() }, 'grace period over; closing remaining connections')
}
