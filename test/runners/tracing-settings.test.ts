import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { tracingSettings } from '../../runners/index.js'

// Which tracing the standard OpenTelemetry variables and --otel-endpoint ask for (the served
// path is tested in test/framework/tracing.test.ts).

const svc = { serviceName: 'quickstart' }
const refused = (env: NodeJS.ProcessEnv, message: RegExp, endpoint?: string) =>
  assert.throws(
    () => tracingSettings({ ...svc, endpoint }, env),
    (e: { code?: string; message: string }) => e.code === 'E_SERVE_CONFIG_INVALID' && message.test(e.message),
  )

describe('tracing settings', () => {
  it('are off without an endpoint, whatever else is set', () => {
    assert.equal(tracingSettings(svc, {}), undefined)
    assert.equal(tracingSettings(svc, { OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), undefined)
  })

  it('take the base endpoint from the flag, then OTEL_EXPORTER_OTLP_ENDPOINT; the traces one is a full URL', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }
    assert.deepEqual(tracingSettings(svc, env), {
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'quickstart',
    })
    assert.equal(
      tracingSettings({ ...svc, endpoint: 'https://otel.example.com' }, env)?.url,
      'https://otel.example.com/v1/traces',
    )
    assert.equal(
      tracingSettings(svc, { ...env, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://jaeger:4318/custom/path' })?.url,
      'http://jaeger:4318/custom/path',
    )
  })

  it('take the protocol from the traces variable, then the general one', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }
    assert.equal(tracingSettings(svc, env)?.protocol, 'http/json')
    assert.equal(
      tracingSettings(svc, { ...env, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol,
      'http/protobuf',
    )
  })

  it('count a variable set to nothing as unset', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ' ' }
    assert.deepEqual(tracingSettings(svc, { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: '', OTEL_TRACES_SAMPLER: '' }), {
      url: 'http://c:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'quickstart',
    })
    assert.equal(tracingSettings(svc, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }), undefined)
  })

  it('are off when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, even with an endpoint', () => {
    assert.equal(tracingSettings({ ...svc, endpoint: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'TRUE' }), undefined)
    assert.equal(tracingSettings({ ...svc, endpoint: 'http://c:4318' }, { OTEL_TRACES_EXPORTER: 'none' }), undefined)
    assert.ok(tracingSettings({ ...svc, endpoint: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'false' }))
  })

  it('refuse what the SDK would ignore, before the server listens', () => {
    refused({}, /--otel-endpoint must be an http:\/\/ or https:\/\/ URL.*"collector:4318"/, 'collector:4318')
    refused({}, /--otel-endpoint is not a URL/, 'http://')
    refused({}, /must be an http:\/\/ or https:\/\//, 'grpc://collector:4317')
    refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'nope' }, /OTEL_EXPORTER_OTLP_ENDPOINT is not a URL/)
    refused(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /"grpc" is not supported.*4318/,
    )
    refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'sometimes' }, /not a sampler/)
    refused(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_TRACES_SAMPLER: 'traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '10',
      },
      /ratio from 0 to 1/,
    )
    refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, /not supported; use otlp/)
    assert.ok(
      tracingSettings(svc, {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    )
  })
})
