import type { ServiceDefinition } from '@grpc/grpc-js'
import { fromJSON, type PackageDefinition } from '@grpc/proto-loader'
import protobuf from 'protobufjs'
import { INFERENCE_PROTO } from './inference-proto.js'

/**
 * How messages look in our handlers: field names as the protocol spells them, int64 as strings
 * (shapes and counts convert where read; a uint64 count may pass 2^53), enums by name, bytes
 * as Buffers, unset fields at their defaults, and the name of the set field of each oneof.
 */
export const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
} as const

let cached: PackageDefinition | undefined

/** The protocol's package, parsed once from its text (no .proto file to ship or find at run time). */
export function inferencePackage(): PackageDefinition {
  if (cached) return cached
  const { root } = protobuf.parse(INFERENCE_PROTO, { keepCase: true })
  cached = fromJSON(root.toJSON(), LOADER_OPTIONS)
  return cached
}

/** GRPCInferenceService, for a server to add. */
export const inferenceService = (): ServiceDefinition =>
  inferencePackage()['inference.GRPCInferenceService'] as ServiceDefinition
