import type { Logger } from 'pino'
import { BundleError } from '../../errors/index.js'
import { activeTracer, type CallContext, endSpan, withCallContext, type StageTimes } from '../../runners/index.js'
import { isStreamBody, mediaTypeMatches, type HeaderReader } from '../io/types.js'
import type { ApiDefinition, ServiceDefinition } from '../service/definition.js'
import { callOptions, refusalDue, refuseEarly } from './call-options.js'
import type { Deadline, Deadlines } from './deadlines.js'
import { errorAnswer } from './error-response.js'
import { BodyOf, ExchangeHeaders, type Answer, type Exchange } from './exchange.js'
import type { Lifecycle } from './lifecycle.js'
import type { ServerMetrics } from './metrics.js'
import { RequestContext } from './request.js'
import { StreamAnswer } from './streaming.js'
import { RequestSpan } from './request-span.js'
import { decodeBody } from './v2/encoding.js'

/** How a stream's generator steps run: inside the request's call context and span, where it has them. */
function streamContext(call: CallContext | undefined, rs: RequestSpan | undefined): { within?: <T>(fn: () => T) => T } {
  if (call && rs) return { within: (fn) => rs.within(() => withCallContext(call, fn)) }
  if (call) return { within: (fn) => withCallContext(call, fn) }
  if (rs) return { within: (fn) => rs.within(fn) }
  return {}
}

/**
 * Server-Timing (W3C): read = receiving the body, decode = turning it into the API's input,
 * method = the API method (runner calls included: their queue, transfer and compute are also
 * given apart), encode = the output into bytes, total = all of it.
 */
function timingHeader(
  started: number,
  read: number,
  decoded: number,
  ran: number,
  encoded: number,
  stages: StageTimes | undefined,
): string {
  const d = (name: string, ms: number) => `${name};dur=${ms.toFixed(3)}`
  const parts = [d('read', read - started), d('decode', decoded - read), d('method', ran - decoded)]
  // Only for requests that called a runner.
  if (stages && stages.computeMs + stages.queueMs + stages.transferMs > 0)
    parts.push(d('queue', stages.queueMs), d('transfer', stages.transferMs), d('compute', stages.computeMs))
  parts.push(d('encode', encoded - ran), d('total', encoded - started))
  return parts.join(', ')
}

export interface PipelineOptions {
  definition: ServiceDefinition
  lifecycle: Lifecycle
  metrics: ServerMetrics
  log: Logger
  deadlines: Deadlines
  maxBodyBytes: number
  serverTiming: boolean
}

/**
 * The request pipeline both hono's routes and serve()'s fast path run: readiness, concurrency,
 * the runners' early refusal (before the body is read), body, decode, the API method (with its
 * timeout), encode — and the count of requests in flight that shutdown waits on.
 */
export class RequestPipeline {
  private inFlight = 0
  /** Of those, API requests still reading their body. */
  private reading = 0
  private idleWaiters: (() => void)[] = []
  /**
   * The runners each API was seen to call, learned from its requests (a runner call records
   * itself in the request's context): asked whether they would take a request before its body
   * is read. Services without runners skip the request context altogether.
   */
  private readonly apiRunners: Map<string, Set<object>>

  constructor(private readonly o: PipelineOptions) {
    const { definition } = o
    this.apiRunners = new Map(
      definition.runners.length ? definition.apis.map((a) => [a.name, new Set<object>()] as const) : [],
    )
  }

  count(): number {
    return this.inFlight
  }

  /** Resolves when no API request is in flight. */
  idle(): Promise<void> {
    return this.inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.idleWaiters.push(resolve))
  }

  /** Counts `fn` as a request in flight (the /v2 routes), so shutdown waits for it. */
  async track<T>(fn: () => Promise<T>): Promise<T> {
    this.inFlight++
    try {
      return await fn()
    } finally {
      this.finish()
    }
  }

  private finish(): void {
    this.inFlight--
    if (this.inFlight === 0) {
      const waiters = this.idleWaiters
      this.idleWaiters = []
      for (const w of waiters) w()
    }
  }

  /** The request body's bytes (media type checked, size capped; gzip/deflate expanded within the same cap). */
  async readInput(ex: Exchange, a: ApiDefinition): Promise<{ contentType: string; bytes: Uint8Array }> {
    const contentType = ex.header('content-type') ?? ''
    if (!mediaTypeMatches(contentType, a.input.mediaTypes)) {
      throw new BundleError(
        'E_HTTP_UNSUPPORTED_MEDIA_TYPE',
        `${a.route} accepts ${a.input.mediaTypes.join(', ')}; got ` +
          `${contentType === '' ? 'no Content-Type' : contentType}`,
      )
    }
    const max = this.o.maxBodyBytes
    const raw = await ex.body(max)
    const encoding = ex.header('content-encoding')
    return { contentType, bytes: encoding === undefined ? raw : await decodeBody(raw, encoding, max) }
  }

  /** The body as the API's input descriptor reads it: at once where the descriptor can (json, text, tensor). */
  decodeInput(
    headers: HeaderReader,
    a: ApiDefinition,
    { contentType, bytes }: { contentType: string; bytes: Uint8Array },
  ): unknown {
    return a.input.decode(new BodyOf(contentType, headers, bytes))
  }

  private tooMany(): BundleError {
    return new BundleError(
      'E_HTTP_TOO_MANY_REQUESTS',
      `the service is handling its maximum of ${this.o.definition.traffic.maxConcurrency} concurrent requests; ` +
        `retry later`,
    )
  }

  /**
   * One API request, start to answer. `respond` gets the answer, exactly once — at the timeout
   * if the method is still running then. The method may go on: it keeps its concurrency slot
   * (and shutdown waits for it) until it really ends, so timeouts cannot pile up unbounded
   * work. Settles when the method has ended.
   */
  handle(ex: Exchange, a: ApiDefinition, requestId: string, respond: (answer: Answer) => void): Promise<void> {
    // Tracing off: one check, no span and no context switch.
    if (activeTracer() === undefined) return this.serve(ex, a, requestId, respond, undefined)
    const rs = RequestSpan.start(
      `POST ${a.route}`,
      { 'http.request.method': 'POST', 'http.route': a.route, 'bundle.request_id': requestId },
      (name) => ex.header(name),
    )!
    // Not sampled: nothing below it records either, so the request runs outside any span
    // context (entering one costs more than the rest of a small request).
    if (!rs.recording()) return this.serve(ex, a, requestId, respond, undefined)
    const ids = rs.ids()
    return rs.within(() =>
      this.serve(
        ex,
        a,
        requestId,
        (x) => {
          rs.status(x.status, x.error)
          // The span covers the request to its answer: a stream's ends with its last item
          // (serve() records how it ended), a timed-out one's at the 504, whatever the method
          // goes on doing.
          if (!(x.body instanceof StreamAnswer)) rs.end()
          respond({ ...x, trace: ids })
        },
        rs,
      ),
    )
  }

  private async serve(
    ex: Exchange,
    a: ApiDefinition,
    requestId: string,
    respond: (answer: Answer) => void,
    rs: RequestSpan | undefined,
  ): Promise<void> {
    const { definition, lifecycle, log, deadlines, serverTiming } = this.o
    const started = performance.now()
    const m = this.o.metrics.endpoint(a.name)
    let answered = false
    const answer = (x: Answer): void => {
      if (answered) return
      answered = true
      m.end(x.status, (performance.now() - started) / 1000)
      respond(x)
    }
    let deadline: Deadline | undefined
    this.inFlight++
    m.begin()
    try {
      const instance = lifecycle.instance
      if (lifecycle.phase !== 'ready' || instance === undefined) throw lifecycle.notServing()
      // Requests still receiving their bodies hold no concurrency slot: slow uploads (or a
      // slowloris trickling bodies) cannot lock out fast clients; the request timeout bounds them.
      if (this.inFlight - this.reading > definition.traffic.maxConcurrency) throw this.tooMany()
      const uses = this.apiRunners.get(a.name)
      const call = uses ? callOptions(ex, a, started, uses) : undefined
      // A request its runners would refuse anyway is refused now, before its body is read:
      // under overload, refusals are most of the work, and this is what keeps them cheap.
      if (call) refuseEarly(uses!, call)
      this.reading++
      let body: Awaited<ReturnType<RequestPipeline['readInput']>>
      try {
        body = await this.readInput(ex, a)
      } finally {
        this.reading--
      }
      if (this.inFlight - this.reading > definition.traffic.maxConcurrency) throw this.tooMany()
      const read = serverTiming ? performance.now() : 0
      // Awaited only when the descriptor needs it: each promise hop shows on a small call.
      const headers = new ExchangeHeaders(ex)
      const decoding = rs?.child('decode', { 'bundle.body_bytes': body.bytes.byteLength })
      let input: unknown
      try {
        input = this.decodeInput(headers, a, body)
        if (input instanceof Promise) input = await input
      } catch (err) {
        if (decoding) endSpan(decoding, err)
        throw err
      }
      decoding?.end()
      const decoded = serverTiming ? performance.now() : 0
      const method = instance[a.name] as (input: unknown, ctx: unknown) => unknown
      const ctx = new RequestContext(requestId, headers, ex.outgoing)
      const stages: StageTimes | undefined =
        serverTiming && call ? { queueMs: 0, computeMs: 0, transferMs: 0 } : undefined
      // A stream's runner calls also leave their queues the moment its client goes (the signal).
      const callCtx = call
        ? {
            ...call,
            gone: () => ctx.gone(),
            ...(stages ? { timing: stages } : {}),
            ...(a.output.kind === 'stream' ? { signal: ctx.signal } : {}),
          }
        : undefined
      const result = callCtx
        ? withCallContext(callCtx, () => method.call(instance, input, ctx))
        : method.call(instance, input, ctx)
      let output = result
      if (result instanceof Promise) {
        // The timeout answers by itself; the method's own end is awaited as it is (no race).
        deadline = deadlines.add(definition.traffic.timeoutMs, () => {
          ctx.abort(new Error('timeout'))
          answer(
            errorAnswer(
              new BundleError('E_HTTP_TIMEOUT', `${a.route} did not finish within ${definition.traffic.timeoutMs} ms`),
              requestId,
              log,
            ),
          )
        })
        output = await result
        if (answered) return
      }
      const ran = serverTiming ? performance.now() : 0
      let encoded = a.output.encode(output, ex.header('accept'))
      if (encoded instanceof Promise) encoded = await encoded
      if (isStreamBody(encoded.body)) {
        // The method has answered with its stream: from here the time between items is what
        // the timeout bounds (see StreamAnswer), and the request counts as in flight until the end.
        if (deadline) deadlines.remove(deadline)
        deadline = undefined
        const stream = new StreamAnswer(encoded.body, {
          idleMs: definition.traffic.timeoutMs,
          abort: (reason) => ctx.abort(reason),
          log,
          requestId,
          outgoing: ex.outgoing,
          // A generator's body runs on each next(): its runner calls get the request's context
          // (and its span, when traced) there.
          ...streamContext(callCtx, rs),
        })
        answered = true
        respond({
          status: 200,
          headers: { 'content-type': encoded.contentType, 'x-request-id': requestId, ...encoded.headers },
          body: stream,
        })
        const ended = await stream.finished
        m.end(ended, (performance.now() - started) / 1000)
        if (rs) {
          // How the stream really ended (its head said 200): 499 its client left, 500 the
          // generator threw, 504 an item took too long.
          rs.span.setAttribute('bundle.stream.status', ended)
          rs.failed(ended)
          rs.end()
        }
        return
      }
      const ok: Answer = {
        status: 200,
        headers: { 'content-type': encoded.contentType, 'x-request-id': requestId, ...encoded.headers },
        body: encoded.body as string | Uint8Array,
      }
      if (serverTiming)
        ok.headers['server-timing'] = timingHeader(started, read, decoded, ran, performance.now(), stages)
      answer(ok)
    } catch (err) {
      // Failed after its timeout was answered: nothing more to say.
      if (answered) return
      const due = refusalDue(err)
      if (due) await due
      answer(errorAnswer(err, requestId, log))
    } finally {
      if (deadline) deadlines.remove(deadline)
      this.finish()
    }
  }
}
