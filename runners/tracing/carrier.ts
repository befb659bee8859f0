import { context, propagation, ROOT_CONTEXT, type Context, type Span, trace } from '@opentelemetry/api'

/**
 * A span's context as it crosses a process boundary — the IPC message to a runner worker, a
 * BullMQ job's data: W3C `traceparent` (and `tracestate` when there is one), as an HTTP request
 * would carry them.
 */
export type TraceCarrier = Readonly<Record<string, string>>

/** The carrier for `span`, through the registered propagator (W3C trace context). */
export function carrierOf(span: Span): TraceCarrier {
  const out: Record<string, string> = {}
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), out)
  return out
}

/** The context a carrier (or an HTTP request's headers) names as parent; ROOT_CONTEXT when none or malformed. */
export function contextOf(carrier: Readonly<Record<string, string | undefined>>): Context {
  return propagation.extract(ROOT_CONTEXT, carrier)
}

/** The active span, when it records (a sampled request): runner calls under it get spans of their own. */
export function recordingSpan(): Span | undefined {
  const span = trace.getSpan(context.active())
  return span?.isRecording() ? span : undefined
}
