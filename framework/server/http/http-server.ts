import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import { createAdaptorServer, getRequestListener } from '@hono/node-server'
import type * as Ws from 'ws'
import { BundleError } from '../../../errors/index.js'
import type { ServiceApp } from '../app.js'
import type { ServeOptions } from './options.js'

/** The HTTP timeouts the server runs with, defaults filled in and checked. */
export interface Timeouts {
  headersTimeout: number
  requestTimeout: number
  sendTimeout: number
  keepAliveTimeout: number
}

/**
 * Slow clients: a client gets 15 s to send its headers and 60 s for the whole request, so
 * trickling connections cannot pile up; idle keep-alive sockets close after 5 s; a client that
 * reads nothing of its response for 60 s is dropped.
 */
export function timeoutsOf(options: ServeOptions): Timeouts {
  const ms = (name: string, v: number | undefined, fallback: number): number => {
    if (v === undefined) return fallback
    if (!Number.isFinite(v) || v <= 0)
      throw new BundleError('E_SERVE_CONFIG_INVALID', `${name} must be a positive number of milliseconds, got ${v}`)
    return v
  }
  const headersTimeout = ms('headersTimeoutMs', options.headersTimeoutMs, 15_000)
  return {
    headersTimeout,
    requestTimeout: Math.max(ms('requestTimeoutMs', options.requestTimeoutMs, 60_000), headersTimeout),
    sendTimeout: ms('sendTimeoutMs', options.sendTimeoutMs, 60_000),
    keepAliveTimeout: ms('keepAliveTimeoutMs', options.keepAliveTimeoutMs, 5_000),
  }
}

/**
 * The soft open-file limit less 256 descriptors kept for runners, Redis, the store and logs (Linux; elsewhere no cap).
 */
function defaultMaxConnections(): number {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    return m ? Math.max(64, Number(m[1]) - 256) : 0
  } catch {
    return 0 // not Linux: no cap
  }
}

/** The node HTTP server for a service app: its fast path first, hono for the rest, WebSockets when it has them. */
export function httpServer(service: ServiceApp, options: ServeOptions, t: Timeouts): Server {
  const honoListener = getRequestListener(service.app.fetch)
  // API routes go straight to the app's fast path (no web Request/Response objects); every
  // other route, and all of them with CORS on, through hono.
  const fast = service.fastPath
  // Node checks the deadlines every connectionsCheckingInterval, so keep it well below them.
  const serverOptions = {
    headersTimeout: t.headersTimeout,
    requestTimeout: t.requestTimeout,
    keepAliveTimeout: t.keepAliveTimeout,
    connectionsCheckingInterval: Math.min(1_000, Math.ceil(t.headersTimeout / 4)),
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
          server: new (ws().WebSocketServer)({ noServer: true, maxPayload: service.websocket.maxMessageBytes }),
        },
      }) as Server)
    : createServer(serverOptions, listenerOf(honoListener))
  // Past this many connections node closes new ones at once: the process keeps file
  // descriptors for its runners, Redis, the store and logs however many clients come.
  const maxConnections = options.maxConnections ?? defaultMaxConnections()
  if (maxConnections > 0) server.maxConnections = maxConnections
  return server
}

/**
 * `ws`, loaded only by a service with WebSocket routes: about 2 MB of heap a server without them
 * would carry and mark on every full GC. (CommonJS: require gives the copy an import would.)
 */
const ws = (): typeof Ws => createRequire(import.meta.url)('ws')
