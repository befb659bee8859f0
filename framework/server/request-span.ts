import {
  type Attributes,
  context,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import { activeTracer, contextOf, endSpan } from '../../runners/index.js'

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

/**
 * The server span of one inference request (an API call, /v2 infer, a gRPC ModelInfer): a child
 * of the caller's span when the request carries W3C `traceparent`, else a new trace. The request
 * is handled within it, so its runner calls, ensemble steps and log lines join it. Made only while
 * tracing is on (start() is undefined otherwise).
 */
export class RequestSpan {
  private constructor(
    readonly span: Span,
    private readonly ctx: Context,
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
    const parent = traceparent ? contextOf({ traceparent, ...(tracestate ? { tracestate } : {}) }) : ROOT_CONTEXT
    const span = tracer.startSpan(name, { kind, attributes }, parent)
    return new RequestSpan(span, trace.setSpan(parent, span))
  }

  /** Runs `fn` (and all it starts, awaited or not) with this span active. */
  within<T>(fn: () => T): T {
    return context.with(this.ctx, fn)
  }

  /** A child span (decode, encode, an ensemble step) that starts now. */
  child(name: string, attributes?: Attributes): Span {
    return activeTracer()!.startSpan(name, { kind: SpanKind.INTERNAL, ...(attributes ? { attributes } : {}) }, this.ctx)
  }

  /** The trace and span ids, for the request's access-log line. */
  ids(): { traceId: string; spanId: string } {
    const c = this.span.spanContext()
    return { traceId: c.traceId, spanId: c.spanId }
  }

  /**
   * The HTTP status answered: 5xx marks the span failed; 4xx is the client's doing, as
   * OpenTelemetry's HTTP conventions have it.
   */
  status(code: number, err?: unknown): void {
    this.span.setAttribute('http.response.status_code', code)
    if (code >= 500)
      this.span.setStatus({ code: SpanStatusCode.ERROR, ...(err ? { message: (err as Error).message } : {}) })
    const type = (err as { code?: unknown } | undefined)?.code
    if (typeof type === 'string') this.span.setAttribute('error.type', type)
  }

  end(err?: unknown): void {
    endSpan(this.span, err)
  }
}

/**
 * `fn` inside a server span named `name` when tracing is on. `http`: the span is an HTTP one, its
 * status the answer's (statusOf) or the error's; else (gRPC) only a failure marks it, when the
 * error is the server's (5xx in the catalog).
 */
export async function withServerSpan<T>(
  name: string,
  attributes: Attributes,
  header: (name: string) => string | undefined,
  fn: () => Promise<T>,
  http?: { statusOf: (value: T) => number },
): Promise<T> {
  const rs = RequestSpan.start(name, attributes, header)
  // Off, or not sampled (nothing below it would record): no span context to enter.
  if (rs === undefined || !rs.span.isRecording()) return fn()
  try {
    const value = await rs.within(fn)
    if (http) rs.status(http.statusOf(value))
    rs.end()
    return value
  } catch (err) {
    const status = (err as { status?: unknown }).status
    const code = typeof status === 'number' ? status : 500
    if (http) rs.status(code, err)
    rs.end(code >= 500 ? err : undefined)
    throw err
  }
}
