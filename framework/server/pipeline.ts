import type { Logger } from 'pino'
import { BundleError } from '../../errors/index.js'
import { activeTracer, type CallContext, endSpan, withCallContext, type StageTimes } from '../../runners/index.js'
import { isStreamBody, mediaTypeMatches, type HeaderReader, type StreamBody } from '../io/types.js'
import type { ApiDefinition, ServiceDefinition } from '../service/definition.js'
import { requestsInFlight } from '../../runners/pool/hot-wait.js'
import { announceLoneCall, callOptions, refusalDue, refuseEarly } from './call-options.js'
import type { Deadline, Deadlines } from './deadlines.js'
import { errorAnswer } from './error-response.js'
import { BodyOf, ExchangeHeaders, type Answer, type Exchange } from './exchange.js'
import type { Lifecycle } from './lifecycle.js'
import type { ServerMetrics } from './metrics.js'
import { RequestContext } from './request.js'
import { StreamAnswer } from './streaming.js'
import { RequestSpan } from './request-span.js'
import { decodeBody } from './content-encoding.js'

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

  /**
   * Counts `fn` as a request in flight (the /v2 routes), so shutdown waits for it; `lone` runs
   * first when nothing else is in flight (the model's idle workers are woken for it, as admit does).
   */
  async track<T>(fn: () => Promise<T>, lone?: () => void): Promise<T> {
    this.inFlight++
    requestsInFlight.count++
    try {
      if (this.inFlight === 1) lone?.()
      return await fn()
    } finally {
      this.finish()
    }
  }

  private finish(): void {
    this.inFlight--
    requestsInFlight.count--
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

  /** Readiness, concurrency and the runners' early refusal: all before the body is read. */
  private admit(ex: Exchange, a: ApiDefinition, started: number) {
    const { definition, lifecycle } = this.o
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
    // Alone: the runner's worker has been asleep since the last request; wake it ahead of the call.
    if (call && this.inFlight === 1) announceLoneCall(uses!)
    return { instance, call }
  }

  /** The body, read without holding a concurrency slot; the slot is checked again once it is in. */
  private async read(ex: Exchange, a: ApiDefinition) {
    this.reading++
    let body: Awaited<ReturnType<RequestPipeline['readInput']>>
    try {
      body = await this.readInput(ex, a)
    } finally {
      this.reading--
    }
    if (this.inFlight - this.reading > this.o.definition.traffic.maxConcurrency) throw this.tooMany()
    return body
  }

  /** The input, in a decode span when traced; a promise only when the descriptor needs one. */
  private decode(
    headers: ExchangeHeaders,
    a: ApiDefinition,
    body: Awaited<ReturnType<RequestPipeline['readInput']>>,
    rs: RequestSpan | undefined,
  ): unknown {
    const decoding = rs?.child('decode', { 'bundle.body_bytes': body.bytes.byteLength })
    if (decoding === undefined) return this.decodeInput(headers, a, body)
    try {
      const input = this.decodeInput(headers, a, body)
      if (!(input instanceof Promise)) return (decoding.end(), input)
      return input.then(
        (v) => (decoding.end(), v),
        (err: unknown) => {
          endSpan(decoding, err)
          throw err
        },
      )
    } catch (err) {
      endSpan(decoding, err)
      throw err
    }
  }

  /** The method's call, inside the request's call context when it calls runners (a value, or a promise). */
  private invoke(
    a: ApiDefinition,
    instance: Record<string, unknown>,
    input: unknown,
    ctx: RequestContext,
    callCtx: CallContext | undefined,
  ): unknown {
    const method = instance[a.name] as (input: unknown, ctx: unknown) => unknown
    return callCtx
      ? withCallContext(callCtx, () => method.call(instance, input, ctx))
      : method.call(instance, input, ctx)
  }

  /**
   * One request as named steps: admit (before the body), read, decode, call (the method, with
   * its timeout), encode, answer. Each step is a method below; this is only their order.
   */
  private async serve(
    ex: Exchange,
    a: ApiDefinition,
    requestId: string,
    respond: (answer: Answer) => void,
    rs: RequestSpan | undefined,
  ): Promise<void> {
    const f = new Flight(this.o.metrics.endpoint(a.name), respond, this.o.serverTiming)
    this.inFlight++
    requestsInFlight.count++
    f.m.begin()
    try {
      const { instance, call } = this.admit(ex, a, f.started)
      const body = await this.read(ex, a)
      f.mark('read')
      // Awaited only when the descriptor needs it: each promise hop shows on a small call.
      const headers = new ExchangeHeaders(ex)
      let input = this.decode(headers, a, body, rs)
      if (input instanceof Promise) input = await input
      f.mark('decoded')
      const ctx = new RequestContext(requestId, headers, ex.outgoing)
      const callCtx = call ? this.callContext(call, a, ctx, f) : undefined
      let output = this.call(f, a, instance, input, ctx, callCtx, requestId)
      if (output instanceof Promise) {
        output = await output
        if (f.answered) return
      }
      f.mark('ran')
      let encoded = a.output.encode(output, ex.header('accept'))
      if (encoded instanceof Promise) encoded = await encoded
      const head = { 'content-type': encoded.contentType, 'x-request-id': requestId, ...encoded.headers }
      if (isStreamBody(encoded.body)) return await this.stream(f, encoded.body, head, ex, ctx, requestId, callCtx, rs)
      f.answer(f.timed({ status: 200, headers: head, body: encoded.body as string | Uint8Array }))
    } catch (err) {
      // Failed after its timeout was answered: nothing more to say.
      if (f.answered) return
      const due = refusalDue(err)
      if (due !== undefined) await due
      f.answer(errorAnswer(err, requestId, this.o.log))
    } finally {
      if (f.deadline) this.o.deadlines.remove(f.deadline)
      this.finish()
    }
  }

  /** What the request's runner calls carry: its priority and deadline, its client's presence, its stage times. */
  private callContext(call: CallContext, a: ApiDefinition, ctx: RequestContext, f: Flight): CallContext {
    return {
      ...call,
      gone: () => ctx.gone(),
      ...(f.stages ? { timing: f.stages } : {}),
      // A stream's runner calls also leave their queues the moment its client goes (the signal).
      ...(a.output.kind === 'stream' ? { signal: ctx.signal } : {}),
    }
  }

  /**
   * The method, with the request's timeout when it answers later: the timeout answers by itself
   * (504) and the method's own end is awaited as it is (no race).
   */
  private call(
    f: Flight,
    a: ApiDefinition,
    instance: Record<string, unknown>,
    input: unknown,
    ctx: RequestContext,
    callCtx: CallContext | undefined,
    requestId: string,
  ): unknown {
    const result = this.invoke(a, instance, input, ctx, callCtx)
    if (!(result instanceof Promise)) return result
    const { definition, deadlines, log } = this.o
    f.deadline = deadlines.add(definition.traffic.timeoutMs, () => {
      ctx.abort(new Error('timeout'))
      const late = `${a.route} did not finish within ${definition.traffic.timeoutMs} ms`
      f.answer(errorAnswer(new BundleError('E_HTTP_TIMEOUT', late), requestId, log))
    })
    return result
  }

  /**
   * The method has answered with a stream: from here the time between items is what the timeout
   * bounds (see StreamAnswer), and the request counts as in flight until its end.
   */
  private async stream(
    f: Flight,
    body: StreamBody,
    headers: Record<string, string>,
    ex: Exchange,
    ctx: RequestContext,
    requestId: string,
    callCtx: CallContext | undefined,
    rs: RequestSpan | undefined,
  ): Promise<void> {
    const { definition, log, deadlines } = this.o
    if (f.deadline) deadlines.remove(f.deadline)
    f.deadline = undefined
    const stream = new StreamAnswer(body, {
      idleMs: definition.traffic.timeoutMs,
      abort: (reason) => ctx.abort(reason),
      log,
      requestId,
      outgoing: ex.outgoing,
      // A generator's body runs on each next(): its runner calls get the request's context
      // (and its span, when traced) there.
      ...streamContext(callCtx, rs),
    })
    f.answered = true
    f.respond({ status: 200, headers, body: stream })
    const ended = await stream.finished
    f.m.end(ended, (performance.now() - f.started) / 1000)
    if (rs) {
      // How the stream really ended (its head said 200): 499 its client left, 500 the
      // generator threw, 504 an item took too long.
      rs.span.setAttribute('bundle.stream.status', ended)
      rs.failed(ended)
      rs.end()
    }
  }
}

/** One request in flight: its metrics, deadline and stage times, and whether it has been answered (exactly once). */
class Flight {
  readonly started = performance.now()
  answered = false
  deadline: Deadline | undefined
  /** With Server-Timing on: when each step ended, and the runner calls' queue, transfer and compute. */
  private readonly at: { read: number; decoded: number; ran: number } | undefined
  readonly stages: StageTimes | undefined

  constructor(
    readonly m: ReturnType<ServerMetrics['endpoint']>,
    readonly respond: (answer: Answer) => void,
    serverTiming: boolean,
  ) {
    this.at = serverTiming ? { read: 0, decoded: 0, ran: 0 } : undefined
    this.stages = serverTiming ? { queueMs: 0, computeMs: 0, transferMs: 0 } : undefined
  }

  mark(step: 'read' | 'decoded' | 'ran'): void {
    if (this.at) this.at[step] = performance.now()
  }

  /** The answer with its Server-Timing header, when on. */
  timed(x: Answer): Answer {
    const at = this.at
    if (at)
      x.headers['server-timing'] = timingHeader(
        this.started,
        at.read,
        at.decoded,
        at.ran,
        performance.now(),
        this.stages,
      )
    return x
  }

  answer(x: Answer): void {
    if (this.answered) return
    this.answered = true
    this.m.end(x.status, (performance.now() - this.started) / 1000)
    this.respond(x)
  }
}
