import { Server, ServerCredentials } from '@grpc/grpc-js'
import type { Registry } from 'prom-client'
import { BundleError } from '../../../errors/index.js'
import type { V2Options } from '../v2/routes.js'
import { inferenceService } from './definition.js'
import { grpcMetrics } from './metrics.js'
import { inferenceHandlers } from './service.js'

export interface GrpcOptions extends V2Options {
  port: number
  host: string
  checkKey?: (authorization: string | undefined) => void
  registry: Registry
  service: string
}

export interface GrpcServer {
  /** The port it listens on (the one asked for, or the one picked for 0). */
  port: number
  /** `grpc://host:port`. */
  url: string
  /** Stops taking calls; waits up to `graceMs` for those in flight (streams included), then cuts the rest. */
  close(graceMs: number): Promise<void>
}

/**
 * Why the gRPC port could not open, as a coded error naming the address (grpc-js reports every
 * bind failure as "No address added", with the system's reason inside).
 */
function bindError(err: Error, host: string, port: number): BundleError {
  if (/EADDRINUSE/.test(err.message))
    return new BundleError(
      'E_ADDRESS_IN_USE',
      `gRPC port ${port} on ${host} is already in use by another process; stop it or pass another ` +
        '--grpc-port (GRPC_PORT)',
      { cause: err },
    )
  const why = /EACCES/.test(err.message)
    ? 'ports below 1024 need privileges'
    : /EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN/.test(err.message)
      ? "that address is not one of this machine's"
      : err.message
  return new BundleError(
    'E_ADDRESS_NOT_AVAILABLE',
    `cannot listen for gRPC on ${host}:${port}: ${why}; pass another --host or --grpc-port`,
    { cause: err },
  )
}

/**
 * The Open Inference Protocol over gRPC (@grpc/grpc-js): GRPCInferenceService on its own port,
 * next to HTTP. Messages over the server's body limit are refused by the transport
 * (RESOURCE_EXHAUSTED) before they are decoded.
 */
export async function startGrpcServer(o: GrpcOptions): Promise<GrpcServer> {
  const server = new Server({
    'grpc.max_receive_message_length': o.maxBodyBytes,
    'grpc.max_send_message_length': -1,
    // Idle clients are pinged; a peer that stops answering is dropped rather than held.
    'grpc.keepalive_time_ms': 60_000,
    'grpc.keepalive_timeout_ms': 20_000,
  })
  const { handlers, drain } = inferenceHandlers({ ...o, metrics: grpcMetrics(o.registry, o.service) })
  server.addService(inferenceService(), handlers)
  // IPv6 literals need brackets in a gRPC target.
  const host = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${o.port}`, ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(bindError(err, o.host, o.port)) : resolve(port),
    ),
  )
  const url = `grpc://${host}:${port}`
  o.log.info({ url }, 'listening (gRPC)')
  return {
    port,
    url,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        drain()
        const timer = setTimeout(() => server.forceShutdown(), graceMs)
        server.tryShutdown(() => {
          clearTimeout(timer)
          resolve()
        })
      }),
  }
}
