import { SpanKind } from '@opentelemetry/api'
import { endSpan } from './call-trace.js'
import { carrierOf, contextOf, type TraceCarrier } from './carrier.js'
import { activeTracer } from './state.js'

/**
 * The spans of one call running in a worker (a runner worker process or thread, a remote worker):
 * one per traced request in its batch, each a child of that request's `batch` span, so every
 * request's trace shows the run inside the worker. Returns their end, and their carriers for
 * work they hand on (a remote worker's own worker processes); nothing is made when the call
 * carries no trace or this process does not trace.
 */
export function executeSpans(
  carriers: readonly TraceCarrier[] | undefined,
  name: string,
  attributes: Record<string, string | number>,
): ExecuteSpans {
  const tracer = activeTracer()
  if (tracer === undefined || carriers === undefined || carriers.length === 0) return UNTRACED
  const spans = carriers.map((c) => tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, contextOf(c)))
  return {
    carriers: spans.map(carrierOf),
    end: (err) => {
      for (const s of spans) endSpan(s, err)
    },
  }
}

export interface ExecuteSpans {
  carriers: TraceCarrier[] | undefined
  end(err?: unknown): void
}

const UNTRACED: ExecuteSpans = { carriers: undefined, end: () => undefined }
