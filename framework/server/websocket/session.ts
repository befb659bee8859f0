import type { Logger } from 'pino'
import { BundleError, ignore } from '../../../errors/index.js'
import { type CallContext, withCallContext } from '../../../runners/index.js'
import type { StreamDescriptor } from '../../io/stream.js'
import type { HeaderReader, IODescriptor } from '../../io/types.js'
import type { ApiDefinition } from '../../service/definition.js'
import { clientFacing } from '../error-response.js'
import { RequestContext } from '../request.js'
import { Inbox } from './inbox.js'
import type { WsMetrics } from './metrics.js'

/** What one WebSocket connection may do (serve options; the defaults suit streamed audio or frames). */
export interface WsLimits {
  /** Largest message in bytes (default 1 MiB); a bigger one closes the socket with 1009. */
  maxMessageBytes: number
  /** Messages a client may send per second, on average over a second (default 200); past it: 4429. */
  maxMessagesPerSecond: number
  /** Closes a socket on which no message went either way for this long (default: traffic.timeoutMs); 4408. */
  idleTimeoutMs: number
}

/**
 * A failure's close code: 4000 + the HTTP status of its error code (4400 bad message, 4408 idle,
 * 4429 too many messages, 4500 the API failed, 4503 the runner refused), with the coded error
 * sent as a last text message just before, as an HTTP error body would be.
 */
export const closeCodeOf = (status: number): number => 4000 + Math.min(999, Math.max(0, status))

/** The socket as a session uses it (hono's WSContext, whose `raw` is the `ws` socket). */
export interface SessionSocket {
  send(data: string | Uint8Array): void
  close(code: number, reason: string): void
  readonly raw?: unknown
}

type Stream = StreamDescriptor<IODescriptor<any, any>>

/** Bytes sent but not yet taken by the client past which the method waits (1 MiB). */
const HIGH_WATER = 1024 * 1024

/**
 * One WebSocket session of a stream-input API: the client's messages, decoded by the input's
 * item descriptor, feed the method's AsyncIterable argument; each item the method yields goes
 * back as one message. The method's end closes the socket normally (1000); a failure sends the
 * error and closes with closeCodeOf(status); the client going away aborts the method (its
 * runner calls leave their queues) and returns its generator.
 */
export class WsSession {
  private readonly inbox: Inbox<unknown>
  private readonly ctx: RequestContext
  private tokens: number
  private refilled = performance.now()
  private idle: NodeJS.Timeout | undefined
  private closed = false
  private draining = false
  /** Settles when the method has finished (or was stopped) and the socket is closed. */
  readonly done: Promise<void>
  private finish: () => void = () => undefined

  constructor(
    private readonly ws: SessionSocket,
    private readonly a: ApiDefinition,
    private readonly o: {
      instance: Record<string, unknown>
      requestId: string
      headers: HeaderReader
      log: Logger
      metrics: WsMetrics
      limits: WsLimits
      /** The runner-call context of the request (deadline, priority, gone); absent without runners. */
      call?: Omit<CallContext, 'gone'>
    },
  ) {
    this.tokens = o.limits.maxMessagesPerSecond
    const raw = ws.raw as { pause?: () => void; resume?: () => void } | undefined
    // The method taking a message is progress too: a backlog it is working through is not idleness.
    this.inbox = new Inbox(64, {
      pause: () => raw?.pause?.(),
      resume: () => raw?.resume?.(),
      taken: () => this.touch(),
    })
    this.stopped = new Promise((resolve) => (this.wakeStopped = resolve))
    this.ctx = new RequestContext(o.requestId, o.headers, undefined)
    this.done = new Promise((resolve) => (this.finish = resolve))
    o.metrics.opened(a.name)
    this.touch()
    void this.run()
  }

  /** A message from the client: counted against the rate, decoded, queued for the method. */
  message(data: string | ArrayBuffer | Uint8Array): void {
    if (this.closed) return
    this.o.metrics.message(this.a.name, 'in')
    this.touch()
    const now = performance.now()
    const rate = this.o.limits.maxMessagesPerSecond
    this.tokens = Math.min(rate, this.tokens + ((now - this.refilled) / 1000) * rate)
    this.refilled = now
    if (this.tokens < 1) {
      this.fail(
        new BundleError(
          'E_HTTP_TOO_MANY_REQUESTS',
          `more than ${rate} messages a second on this WebSocket; send fewer`,
        ),
      )
      return
    }
    this.tokens -= 1
    try {
      const item = (this.a.input as Stream).fromMessage(data instanceof ArrayBuffer ? new Uint8Array(data) : data)
      if (item instanceof Promise)
        item.then(
          (v) => this.inbox.push(v),
          (err: unknown) => this.fail(err),
        )
      else this.inbox.push(item)
    } catch (err) {
      this.fail(err)
    }
  }

  /** The client closed or the connection dropped: stop the method. */
  gone(): void {
    if (this.closed) return
    this.closed = true
    this.stop(new BundleError('E_HTTP_CLIENT_CLOSED', 'the client closed the WebSocket'))
  }

  /** The server is draining: no more input; the method finishes what it has and the socket closes (1001). */
  drain(): void {
    this.draining = true
    this.inbox.end()
  }

  isClosed(): boolean {
    return this.closed
  }

  /** Settles once the session is stopped (a send waiting for the client to read gives up then). */
  private readonly stopped: Promise<void>
  private wakeStopped: () => void = () => undefined

  /**
   * Sends one message. Past HIGH_WATER bytes the client has not taken yet, waits until this one
   * has gone out to the socket: a client that stops reading holds the method, not the server's
   * memory (and its session then ends on the idle timeout).
   */
  private async send(message: string | Uint8Array): Promise<void> {
    const raw = this.ws.raw as
      | { bufferedAmount?: number; send?(data: string | Uint8Array, cb: (err?: Error) => void): void }
      | undefined
    if (raw?.send === undefined) return this.ws.send(message)
    const flushed = new Promise<void>((resolve) => raw.send!(message, () => resolve()))
    if ((raw.bufferedAmount ?? 0) > HIGH_WATER) await Promise.race([flushed, this.stopped])
  }

  private stop(reason: BundleError): void {
    this.wakeStopped()
    clearTimeout(this.idle)
    this.ctx.abort(reason)
    this.inbox.fail(reason)
  }

  private touch(): void {
    clearTimeout(this.idle)
    this.idle = setTimeout(
      () =>
        this.fail(
          new BundleError(
            'E_HTTP_REQUEST_TIMEOUT',
            `no message either way for ${this.o.limits.idleTimeoutMs} ms; closing`,
          ),
        ),
      this.o.limits.idleTimeoutMs,
    )
    this.idle.unref()
  }

  /** Ends the session on an error: the coded error as a last message, then the close code. */
  private fail(err: unknown): void {
    if (this.closed) return
    const e = clientFacing(err, this.o.requestId, this.o.log)
    this.closed = true
    this.stop(e)
    try {
      const raw = this.ws.raw as { bufferedAmount?: number; terminate?(): void } | undefined
      // A client that stopped reading would not read the error or the close either.
      if ((raw?.bufferedAmount ?? 0) > HIGH_WATER && raw?.terminate) raw.terminate()
      else {
        this.ws.send(JSON.stringify({ error: { code: e.code, message: e.message, requestId: this.o.requestId } }))
        this.ws.close(closeCodeOf(e.status), e.code)
      }
    } catch {
      // the socket is already gone
    }
    this.o.metrics.closed(this.a.name, closeCodeOf(e.status))
  }

  private async run(): Promise<void> {
    const call: CallContext | undefined = this.o.call
      ? { ...this.o.call, gone: () => this.ctx.gone(), signal: this.ctx.signal }
      : undefined
    const within = <T>(fn: () => T): T => (call ? withCallContext(call, fn) : fn())
    const method = this.o.instance[this.a.name] as (input: unknown, ctx: unknown) => unknown
    let it: AsyncIterator<unknown> | undefined
    try {
      const out = (await within(() => method.call(this.o.instance, this.inbox, this.ctx))) as AsyncIterable<unknown>
      if (out === null || typeof out?.[Symbol.asyncIterator] !== 'function')
        throw new BundleError('E_OUTPUT_INVALID', `${this.a.route}: the API did not return an async iterable`)
      it = out[Symbol.asyncIterator]()
      const output = this.a.output as Stream
      for (;;) {
        const next = await within(() => it!.next())
        if (next.done || this.closed) break
        const message = await output.toMessage(next.value)
        if (this.closed) break
        await this.send(message)
        if (this.closed) break
        this.o.metrics.message(this.a.name, 'out')
        this.touch()
      }
      if (!this.closed) {
        this.closed = true
        clearTimeout(this.idle)
        // 1000 when the method finished; 1001 when it finished because the server is stopping.
        const code = this.draining ? 1001 : 1000
        this.ws.close(code, this.draining ? 'server stopping' : 'done')
        this.o.metrics.closed(this.a.name, code)
      }
    } catch (err) {
      if (!this.closed) this.fail(err)
    } finally {
      clearTimeout(this.idle)
      if (it)
        void Promise.resolve(it.return?.()).catch(
          ignore("the session is over: its generator's cleanup cannot reach the client any more"),
        )
      this.o.metrics.ended(this.a.name)
      this.finish()
    }
  }
}
