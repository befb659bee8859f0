// Tracing (OpenTelemetry): settings from the standard variables, the SDK started on demand, and
// the spans runners make. Off unless an OTLP endpoint is given; then a request's trace follows
// it through the batcher into the worker processes (carriers in the IPC and BullMQ messages).
export { CallTrace, endSpan, type SpanScope, spanAround, traced, type TracedPart } from './call-trace.js'
export { carrierOf, contextOf, recordingSpan, type TraceCarrier } from './carrier.js'
export { executeSpans, type ExecuteSpans } from './execute.js'
export { tracingSettings, type TracingSettings } from './settings.js'
export { flushTracing, startTracing, stopTracing } from './start.js'
export { activeTracer, activeTracing } from './state.js'
