import { type RouteSpec, route } from '../../route-spec.js'

const rpc = (name: string, access: 'open' | 'keyed', what: string): RouteSpec =>
  route('RPC', name, access, 'grpc', what)

/**
 * GRPCInferenceService's methods on the gRPC port (--grpc-port), with the same access as their
 * /v2 routes: metadata and health open, inference and the repository keyed. service.ts's handlers
 * are keyed by these names and take their access from here.
 */
export const GRPC_ROUTES: readonly RouteSpec[] = [
  rpc('ServerLive', 'open', 'server live'),
  rpc('ServerReady', 'open', 'server ready'),
  rpc('ModelReady', 'open', 'model ready'),
  rpc('ServerMetadata', 'open', 'server metadata'),
  rpc('ModelMetadata', 'open', 'model metadata'),
  rpc('ModelConfig', 'open', 'model configuration'),
  rpc('ModelStatistics', 'open', 'model statistics'),
  rpc('ModelInfer', 'keyed', 'inference'),
  rpc('ModelStreamInfer', 'keyed', 'inference, a stream of requests and answers'),
  rpc('RepositoryIndex', 'keyed', 'the models the store holds, and their state'),
  rpc('RepositoryModelLoad', 'keyed', 'load a model'),
  rpc('RepositoryModelUnload', 'keyed', 'unload a model'),
]
