import type { Tracer } from '@opentelemetry/api'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node'
import type { TracingSettings } from './settings.js'

// The OpenTelemetry SDK, loaded only when tracing is on (start.ts imports this file then). The
// build bundles this file with the SDK packages into one module (scripts/bundle-sdk.mjs): the
// packages are ~9 MB as installed (most of it semantic-convention tables this never reads),
// bundled ~0.7 MB, and only @opentelemetry/api stays a package, shared with the service's
// own instrumentation.

/** What a started SDK hands back: the tracer, and how to send what is buffered and stop. */
export interface Sdk {
  tracer: Tracer
  flush(): Promise<void>
  shutdown(): Promise<void>
}

/**
 * Starts a tracer provider exporting over OTLP/HTTP (protobuf or JSON) to `settings.url`, in
 * batches (OTEL_BSP_* tune them), sampled as OTEL_TRACES_SAMPLER says (parent-based, always on by
 * default), and registers it (with the W3C trace-context propagator and an AsyncLocalStorage
 * context manager) as the process's global provider. `attributes` describe this process; the
 * environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over them.
 */
export function startSdk(settings: TracingSettings, attributes: Record<string, string | number>): Sdk {
  const Exporter = settings.protocol === 'http/json' ? JsonExporter : ProtobufExporter
  const exporter = new Exporter({ url: settings.url })
  // process.pid tells the processes of one server apart; not the process detector, whose
  // command line would carry secrets given as flags (--api-key).
  const resource = resourceFromAttributes({
    'service.name': settings.serviceName,
    'process.pid': process.pid,
    ...attributes,
  }).merge(detectResources({ detectors: [envDetector] }))
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] })
  provider.register()
  return {
    tracer: provider.getTracer('modelbundle'),
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  }
}
