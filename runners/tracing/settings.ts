import { BundleError } from '../../errors/index.js'

/** Where and how a process sends its spans (the API process decides; its workers are told). */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string
  protocol: 'http/protobuf' | 'http/json'
  /** service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another. */
  serviceName: string
}

const SAMPLERS = new Set([
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
])

const invalid = (message: string) => new BundleError('E_SERVE_CONFIG_INVALID', message)

function checkedUrl(url: string, from: string): string {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw invalid(
      `${from} is not a URL: ${JSON.stringify(url)}; give the collector's OTLP/HTTP address, ` +
        'e.g. http://localhost:4318',
    )
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw invalid(
      `${from} must be an http:// or https:// URL (OTLP over HTTP, e.g. http://localhost:4318), got ` +
        JSON.stringify(url),
    )
  return url
}

/**
 * Tracing as the standard OpenTelemetry variables (and `--otel-endpoint`) ask for it, or
 * undefined when it is off: off unless an endpoint is given (the flag, OTEL_EXPORTER_OTLP_ENDPOINT
 * or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and off whatever is given when OTEL_SDK_DISABLED=true
 * or OTEL_TRACES_EXPORTER=none. A value the SDK would ignore with a warning (an unknown protocol
 * or sampler, a ratio outside 0..1) is refused here, before the server listens.
 */
export function tracingSettings(
  o: { endpoint?: string | undefined; serviceName: string },
  processEnv: NodeJS.ProcessEnv = process.env,
): TracingSettings | undefined {
  // A variable set to nothing counts as unset, as the OpenTelemetry specification has it.
  const env = (name: string): string | undefined => processEnv[name]?.trim() || undefined
  if (env('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined
  const exporter = env('OTEL_TRACES_EXPORTER')?.toLowerCase()
  if (exporter === 'none') return undefined
  if (exporter !== undefined && exporter !== 'otlp')
    throw invalid(`OTEL_TRACES_EXPORTER=${exporter} is not supported; use otlp (or none to turn tracing off)`)
  const tracesUrl = env('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const base = o.endpoint ?? env('OTEL_EXPORTER_OTLP_ENDPOINT')
  // The flag wins over both variables; the signal-specific variable is a full URL, the others a base.
  const url =
    o.endpoint !== undefined
      ? `${checkedUrl(o.endpoint, '--otel-endpoint').replace(/\/+$/, '')}/v1/traces`
      : tracesUrl
        ? checkedUrl(tracesUrl, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
        : base
          ? `${checkedUrl(base, 'OTEL_EXPORTER_OTLP_ENDPOINT').replace(/\/+$/, '')}/v1/traces`
          : undefined
  if (url === undefined) return undefined
  const protocol = env('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? env('OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf'
  if (protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw invalid(
      `OTLP protocol ${JSON.stringify(protocol)} is not supported; set OTEL_EXPORTER_OTLP_PROTOCOL to http/protobuf ` +
        '(the default; collectors listen on port 4318) or http/json',
    )
  const sampler = env('OTEL_TRACES_SAMPLER')?.toLowerCase()
  if (sampler && !SAMPLERS.has(sampler))
    throw invalid(`OTEL_TRACES_SAMPLER=${sampler} is not a sampler; use one of ${[...SAMPLERS].join(', ')}`)
  const arg = env('OTEL_TRACES_SAMPLER_ARG')
  if (sampler?.endsWith('traceidratio') && arg) {
    const ratio = Number(arg)
    if (!(ratio >= 0 && ratio <= 1))
      throw invalid(`OTEL_TRACES_SAMPLER_ARG=${arg} must be a ratio from 0 to 1 (e.g. 0.1: one trace in ten)`)
  }
  return { url, protocol, serviceName: o.serviceName }
}
