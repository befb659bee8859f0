import { loadPackageDefinition, type ServiceClientConstructor } from '@grpc/grpc-js'
import { inferencePackage } from '../../server/grpc/definition.js'

/** The GRPCInferenceService client class, from the same protocol text the server serves. */
export function inferenceClientClass(): ServiceClientConstructor {
  const pkg = loadPackageDefinition(inferencePackage()) as unknown as {
    inference: { GRPCInferenceService: ServiceClientConstructor }
  }
  return pkg.inference.GRPCInferenceService
}
