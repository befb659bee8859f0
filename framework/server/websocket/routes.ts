import { upgradeWebSocket } from '@hono/node-server'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import { BundleError } from '../../../errors/index.js'
import { parseClientPriority } from '../../../runners/index.js'
import type { ApiDefinition, ServiceDefinition } from '../../service/definition.js'
import { route } from '../../route-spec.js'
import type { Lifecycle } from '../lifecycle.js'
import { bind, type Handler, type ServerPart } from '../part.js'
import { headerOf } from '../request.js'
import { wsMetrics } from './metrics.js'
import { type SessionSocket, type WsLimits, WsSession } from './session.js'

export type { WsLimits } from './session.js'

/** An API whose input is a stream of messages: served as a WebSocket route. */
export const isWebSocketApi = (a: ApiDefinition): boolean => a.input.kind === 'stream'

/** The limits from serve options, then BUNDLE_WS_* variables, then defaults. */
export function wsLimits(given: Partial<WsLimits> | undefined, timeoutMs: number): WsLimits {
  const pick = (name: keyof WsLimits, env: string, fallback: number): number => {
    const raw = given?.[name] ?? (process.env[env] !== undefined ? Number(process.env[env]) : fallback)
    if (!Number.isFinite(raw) || raw <= 0)
      throw new BundleError(
        'E_SERVE_CONFIG_INVALID',
        `websocket ${name} (${env}) must be a positive number, got ${raw}`,
      )
    return raw
  }
  return {
    maxMessageBytes: pick('maxMessageBytes', 'BUNDLE_WS_MAX_MESSAGE_BYTES', 1024 * 1024),
    maxMessagesPerSecond: pick('maxMessagesPerSecond', 'BUNDLE_WS_MAX_MESSAGES_PER_SECOND', 200),
    idleTimeoutMs: pick('idleTimeoutMs', 'BUNDLE_WS_IDLE_TIMEOUT_MS', timeoutMs),
  }
}

/**
 * The WebSocket routes of a service (hono's WebSocket helper for Node; serve() attaches the
 * `ws` server it needs). A session passes the same gates as an HTTP request before the
 * upgrade — the key (the app's middleware), readiness, a cap of traffic.maxConcurrency open
 * sessions (counted apart from HTTP requests, which long sessions must not lock out) — and
 * keeps the request's priority for its runner calls. While the server drains, sessions get no
 * more input and close when their method finishes; stop() ends any still open. A refused
 * upgrade is answered with its status and headers only: node-server's upgrade path drops the
 * body.
 */
export class WebSocketRoutes {
  private readonly sessions = new Set<WsSession>()
  private readonly sockets = new Set<{ terminate?: () => void }>()
  private readonly idleWaiters: (() => void)[] = []

  readonly limits: WsLimits

  constructor(
    private readonly o: {
      definition: ServiceDefinition
      lifecycle: Lifecycle
      log: Logger
      registry: Registry
      readonly limits: WsLimits
    },
  ) {
    this.limits = o.limits
  }

  apis(): ApiDefinition[] {
    return this.o.definition.apis.filter(isWebSocketApi)
  }

  /** One route per WebSocket API: GET with Upgrade, keyed. */
  part(): ServerPart {
    const apis = this.apis()
    if (apis.length === 0) return { name: 'websocket', routes: [] }
    const metrics = wsMetrics(
      this.o.registry,
      this.o.definition.name,
      apis.map((a) => a.name),
    )
    const routes = apis.flatMap((a) =>
      bind([route('GET', a.route, 'keyed', 'websocket', `${a.name} (WebSocket)`)], {
        [`GET ${a.route}`]: this.upgrade(a, metrics),
      }),
    )
    return { name: 'websocket', routes }
  }

  /** The upgrade, behind the same gates as an HTTP API (readiness, concurrency), then one session. */
  private upgrade(a: ApiDefinition, metrics: ReturnType<typeof wsMetrics>): Handler {
    const { definition, lifecycle, log, limits } = this.o
    const usesRunners = definition.runners.length > 0
    return async (c, next) => {
      if ((headerOf(c, 'upgrade') ?? '').toLowerCase() !== 'websocket')
        throw new BundleError('E_HTTP_UPGRADE_REQUIRED', `${a.route} is a WebSocket route; open a WebSocket to it`)
      const instance = lifecycle.instance
      if (lifecycle.phase !== 'ready' || instance === undefined) throw lifecycle.notServing()
      if (this.sessions.size >= definition.traffic.maxConcurrency)
        throw new BundleError(
          'E_HTTP_TOO_MANY_REQUESTS',
          `the service holds its maximum of ${definition.traffic.maxConcurrency} WebSocket sessions; retry later`,
        )
      const priority = parseClientPriority(headerOf(c, 'request-priority'), 'the Request-Priority header') ?? a.priority
      const requestId = c.get('requestId') as string
      let session: WsSession | undefined
      let errorCode: number | undefined
      const upgrade = upgradeWebSocket(() => ({
        onOpen: (_event, ws) => {
          const raw = ws.raw as { terminate?: () => void } | undefined
          if (raw) this.sockets.add(raw)
          session = new WsSession(ws as unknown as SessionSocket, a, {
            instance: instance as Record<string, unknown>,
            requestId,
            headers: { get: (name) => headerOf(c, name.toLowerCase()) ?? null },
            log,
            metrics,
            limits,
            ...(usesRunners ? { call: priority !== undefined ? { priority } : {} } : {}),
          })
          const s = session
          this.sessions.add(s)
          void s.done.finally(() => {
            this.sessions.delete(s)
            if (raw) this.sockets.delete(raw)
            if (this.sessions.size === 0) for (const w of this.idleWaiters.splice(0)) w()
          })
        },
        onMessage: (event) => session?.message(event.data as string | ArrayBuffer),
        onClose: (event) => {
          // A close the server did not send itself (it counted those): the client's code, 1009
          // from the message cap, or 4499 for a connection that just dropped.
          if (session && !session.isClosed())
            metrics.closed(a.name, errorCode ?? (event.code === 1005 || event.code === 1006 ? 4499 : event.code))
          session?.gone()
        },
        // ws closes the socket after a protocol error (1009 for a message over the cap, which it
        // sends the client): remembered here, counted and stopped in onClose.
        onError: (event) => {
          const code = (event as unknown as { error?: { code?: string } }).error?.code
          errorCode = code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : 1002
        },
      }))
      return upgrade(c, next)
    }
  }

  /** Open sessions (shutdown waits for them, as for requests in flight). */
  count(): number {
    return this.sessions.size
  }

  /** Resolves when no session is open. */
  idle(): Promise<void> {
    return this.sessions.size === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  /** Draining: sessions take no more input and close once their method has finished. */
  drain(): void {
    for (const s of this.sessions) s.drain()
  }

  /** Ends every session still open (after the grace period). */
  stop(): void {
    for (const raw of this.sockets) raw.terminate?.()
  }
}
