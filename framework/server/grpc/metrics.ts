import { status as Status } from '@grpc/grpc-js'
import type { Registry } from 'prom-client'
import { CounterFamily, GaugeFamily, HistogramFamily } from '../../../runners/index.js'
import { LATENCY_BUCKETS } from '../metrics.js'

export interface GrpcMetrics {
  /** Counts one call (or one request of a stream) ending with `code`, after `seconds`. */
  done(rpc: string, code: Status, seconds: number): void
  streamOpened(): void
  streamClosed(): void
}

const NAMES = Object.fromEntries(Object.entries(Status).map(([k, v]) => [v, k])) as Record<number, string>

// Codes whose series exist from the first scrape, so rate() and error ratios work before the first error.
const KNOWN = [Status.OK, Status.INVALID_ARGUMENT, Status.NOT_FOUND, Status.UNAUTHENTICATED, Status.UNAVAILABLE]

/**
 * gRPC requests next to the HTTP ones, by RPC and status code (ModelStreamInfer counts each
 * request on a stream), and the streams open now.
 */
export function grpcMetrics(registry: Registry, service: string): GrpcMetrics {
  const total = new CounterFamily(
    'bundle_grpc_requests_total',
    'Open Inference Protocol requests over gRPC, by RPC and status code (each request of a stream counts)',
    registry,
  )
  const duration = new HistogramFamily(
    'bundle_grpc_request_duration_seconds',
    'gRPC request latency, from the request message to its answer',
    registry,
    LATENCY_BUCKETS,
  )
  const streams = new GaugeFamily('bundle_grpc_streams_open', 'ModelStreamInfer streams open now', registry)
  const open = streams.labels({ service })
  for (const code of KNOWN) total.labels({ service, rpc: 'ModelInfer', code: NAMES[code]! })
  return {
    done(rpc, code, seconds) {
      total.labels({ service, rpc, code: NAMES[code] ?? String(code) }).value++
      duration.labels({ service, rpc }).observe(seconds)
    },
    streamOpened: () => void open.value++,
    streamClosed: () => void open.value--,
  }
}
