import type { Redis, RedisOptions } from 'ioredis'
import { BundleError } from '../../errors/index.js'
import { ioredis } from './libs.js'

/**
 * One Redis server as modelbundle uses it: BullMQ queues for remote runners and tasks, worker
 * heartbeats, the response cache. Connections are made here so every one fails fast while Redis
 * is down (no offline queue on the commands a request waits for) and reconnects by itself.
 */
export class RedisLink {
  private readonly conns: Redis[] = []
  private command: Redis | undefined
  /** Why Redis cannot be used now, or undefined while it can. */
  private down: string | undefined = 'connecting'
  private readonly listeners = new Set<(up: boolean) => void>()

  /** The URL without credentials, for logs and /readyz. */
  readonly shown: string

  constructor(
    readonly url: string,
    /** Key prefix for every queue and key (default "mb"): several deployments can share a Redis. */
    readonly prefix = 'mb',
  ) {
    try {
      const u = new URL(url)
      if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new Error('scheme')
    } catch {
      throw new BundleError(
        'E_CLI_USAGE',
        `"${url.replace(/\/\/[^@/]*@/, '//***@')}" is not a Redis URL; use redis://HOST:PORT[/DB]`,
      )
    }
    this.shown = url.replace(/\/\/[^@/]*@/, '//***@')
  }

  /**
   * A new connection. `blocking`: for BullMQ workers and event readers, which wait on Redis and
   * must retry forever; otherwise commands fail at once while disconnected.
   * @internal ioredis types stay out of the published declarations (they do not type-check
   * without skipLibCheck in a user's project)
   */
  connection(blocking = false): Redis {
    const options: RedisOptions = {
      maxRetriesPerRequest: blocking ? null : 1,
      enableOfflineQueue: blocking,
      // Reconnect quickly and keep trying: the service resumes by itself when Redis is back.
      retryStrategy: (attempt) => Math.min(50 * attempt, 1_000),
      connectTimeout: 2_000,
      lazyConnect: false,
    }
    const conn = new (ioredis().Redis)(this.url, options)
    // Errors are reported through status (ready / why not), never as unhandled events.
    conn.on('error', () => undefined)
    this.conns.push(conn)
    return conn
  }

  /** @internal Closes a connection made by connection() (BullMQ leaves connections it was given open). */
  release(conn: Redis): void {
    const i = this.conns.indexOf(conn)
    if (i >= 0) this.conns.splice(i, 1)
    conn.disconnect()
  }

  private offset = 0
  private clockTimer: NodeJS.Timeout | undefined

  /**
   * Now, on Redis's clock (ms): heartbeats and deadlines are compared across machines, so they
   * use the one clock all of them see. The offset to it is measured every ten seconds.
   */
  now(): number {
    if (this.clockTimer === undefined) {
      const sync = async () => {
        try {
          const t0 = Date.now()
          const [sec, usec] = await this.client().time()
          const t1 = Date.now()
          this.offset = Number(sec) * 1000 + Math.floor(Number(usec) / 1000) - Math.round((t0 + t1) / 2)
        } catch {
          // keep the last offset
        }
      }
      void sync()
      this.clockTimer = setInterval(sync, 10_000)
      this.clockTimer.unref()
    }
    return Date.now() + this.offset
  }

  /** @internal The shared command connection; its state is the link's state. */
  client(): Redis {
    if (this.command === undefined) {
      const c = (this.command = this.connection(false))
      c.on('ready', () => this.set(undefined))
      c.on('error', (err: Error) => this.set(`Redis at ${this.shown} is unreachable: ${err.message}`))
      c.on('close', () => this.set(this.down ?? `Redis at ${this.shown} closed the connection`))
      c.on('end', () => this.set(`Redis at ${this.shown} is unreachable`))
    }
    return this.command
  }

  private set(down: string | undefined): void {
    const was = this.down === undefined
    this.down = down
    if (was !== (down === undefined)) for (const l of this.listeners) l(down === undefined)
  }

  /** Called with true when Redis becomes usable, false when it stops being so. */
  onChange(listener: (up: boolean) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** undefined when usable; else why not (for /readyz). */
  unavailable(): string | undefined {
    this.client()
    return this.down
  }

  /** Throws E_REMOTE_UNAVAILABLE while Redis is down: callers fail fast instead of waiting. */
  check(): void {
    // Clients learn that Redis is down, not where it lives (that is in /readyz and the log).
    if (this.unavailable() !== undefined)
      throw new BundleError(
        'E_REMOTE_UNAVAILABLE',
        'Redis is unreachable, so remote runners and tasks are too; retry shortly',
      )
  }

  /** Resolves once connected, or rejects after `ms`. */
  async connected(ms = 5_000): Promise<void> {
    if (this.unavailable() === undefined) return
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        off()
        reject(new BundleError('E_REMOTE_UNAVAILABLE', 'Redis is unreachable'))
      }, ms)
      const off = this.onChange((up) => {
        if (!up) return
        clearTimeout(timer)
        off()
        resolve()
      })
    })
  }

  async close(): Promise<void> {
    clearInterval(this.clockTimer)
    // quit() waits for a connection that may never come back; a link that is down just drops.
    await Promise.all(
      this.conns.splice(0).map((c) =>
        c.status === 'ready'
          ? c.quit().then(
              () => undefined,
              () => c.disconnect(),
            )
          : c.disconnect(),
      ),
    )
    this.command = undefined
  }
}
