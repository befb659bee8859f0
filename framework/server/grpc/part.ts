import type { PortPart } from '../part.js'
import { GRPC_ROUTES } from './route-list.js'
import type { GrpcOptions } from './server.js'

/**
 * The Open Inference Protocol over gRPC as a part of the app, on its own port (--grpc-port).
 * grpc-js, proto-loader and protobufjs load when the port opens: about 4 MB of heap that a server
 * without gRPC would otherwise carry, and mark on every full GC (docs/defaults.md, "What the API
 * process loads").
 */
export function grpcPart(o: Omit<GrpcOptions, 'host'>): PortPart {
  return {
    name: 'grpc',
    routes: GRPC_ROUTES,
    listen: async (host) => (await import('./server.js')).startGrpcServer({ ...o, host }),
  }
}
