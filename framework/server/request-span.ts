import {
  type Attributes,
  context,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api'
import { activeTracer, contextOf } from '../../runners/index.js'

/**
 * trace_id and span_id of the span active where a log line is written, for pino's mixin (none
 * when off). A new object each time: pino merges the line's own fields into it.
 */
export function traceFields(): Record<string, string> {
  if (activeTracer() === undefined) return {}
  const span = trace.getSpan(context.active())
  if (span === undefined) return {}
  const c = span.spanContext()
  return { trace_id: c.traceId, span_id: c.spanId }
}

/** A coded error as a span records it: the code as `error.type`, the message as the status's. */
export interface SpanError {
  code?: unknown
  message?: unknown
  status?: unknown
}

/**
 * The server span of one inference request (an API call, /v2 infer, a gRPC ModelInfer): a child
 * of the caller's span when the request carries W3C `traceparent` (else of the span active here,
 * when the process has instrumentation of its own), else a new trace. The request is handled
 * within it, so its runner calls, ensemble steps and log lines join it. Made only while tracing is
 * on (start() is undefined otherwise).
 */
export class RequestSpan {
  private ended = false

  private constructor(
    readonly span: Span,
    private readonly ctx: Context,
    private readonly tracer: Tracer,
  ) {}

  static start(
    name: string,
    attributes: Attributes,
    header: (name: string) => string | undefined,
    kind: SpanKind = SpanKind.SERVER,
  ): RequestSpan | undefined {
    const tracer = activeTracer()
    if (tracer === undefined) return undefined
    const traceparent = header('traceparent')
    const tracestate = header('tracestate')
    const parent = traceparent
      ? contextOf({ traceparent, ...(tracestate ? { tracestate } : {}) })
      : trace.getSpan(context.active())
        ? context.active()
        : ROOT_CONTEXT
    const span = tracer.startSpan(name, { kind, attributes }, parent)
    return new RequestSpan(span, trace.setSpan(parent, span), tracer)
  }

  /** Whether it records (sampled): an unsampled request need not run inside it. */
  recording(): boolean {
    return this.span.isRecording()
  }

  /** Runs `fn` (and all it starts, awaited or not) with this span active. */
  within<T>(fn: () => T): T {
    return context.with(this.ctx, fn)
  }

  /** A child span (decode) that starts now; the tracer is the one the request began with. */
  child(name: string, attributes?: Attributes): Span {
    return this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, ...(attributes ? { attributes } : {}) }, this.ctx)
  }

  /** The trace and span ids, for the request's access-log line. */
  ids(): { traceId: string; spanId: string } {
    const c = this.span.spanContext()
    return { traceId: c.traceId, spanId: c.spanId }
  }

  /**
   * The HTTP status answered, and the error answered with, if any: its code goes in `error.type`.
   * Only 5xx marks the span failed; 4xx is the client's doing, as OpenTelemetry's HTTP
   * conventions have it.
   */
  status(code: number, err?: SpanError): void {
    this.span.setAttribute('http.response.status_code', code)
    this.failed(code, err)
  }

  /** A failure with no HTTP status to record (gRPC): `error.type`, and a failed span if the server's. */
  failed(code: number, err?: SpanError): void {
    if (typeof err?.code === 'string') this.span.setAttribute('error.type', err.code)
    if (code >= 500)
      this.span.setStatus({
        code: SpanStatusCode.ERROR,
        ...(typeof err?.message === 'string' ? { message: err.message } : {}),
      })
  }

  /** Ends it, once (a timed-out request's answer ends it; the method's late end does not again). */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.span.end()
  }
}

/**
 * `fn` inside a server span when tracing is on (`describe` names it: called only then). `http`:
 * the span is an HTTP one, its status the answer's (statusOf) or the error's; else (gRPC) an
 * error records its code, and marks the span failed when it is the server's (5xx in the catalog).
 * Off, or not sampled (nothing below would record), `fn` runs as it is: no span context to enter.
 */
export function withServerSpan<T>(
  describe: () => { name: string; attributes: Attributes },
  header: (name: string) => string | undefined,
  fn: () => Promise<T>,
  o: { statusOf?: (value: T) => number; started?: (rs: RequestSpan) => void } = {},
): Promise<T> {
  if (activeTracer() === undefined) return fn()
  const { name, attributes } = describe()
  const rs = RequestSpan.start(name, attributes, header)!
  if (!rs.recording()) return fn()
  o.started?.(rs)
  return rs.within(fn).then(
    (value) => {
      if (o.statusOf) rs.status(o.statusOf(value))
      rs.end()
      return value
    },
    (err: unknown) => {
      const e = err as SpanError
      const code = typeof e?.status === 'number' ? e.status : 500
      if (o.statusOf) rs.status(code, e)
      else rs.failed(code, e)
      rs.end()
      throw err
    },
  )
}
