import { siblingModule } from '../pool/backend.js'
import type { BackendSpec, GatheredTensor, WireTensor } from '../pool/protocol.js'
import type { OnnxBackendOptions } from './backend.js'

// What the API side knows of the onnx backend (./backend.ts, loaded only in workers): its module
// and options, its methods' names and messages.

export const onnxBackend = (options: OnnxBackendOptions): BackendSpec => ({
  module: siblingModule(new URL('./backend.js', import.meta.url)),
  options,
})

/**
 * The ONNX backend's method (ONNX_RUN): one batch's input tensors by name, optionally the
 * outputs to compute (all by default); it answers every output as a WireTensor. A local pool
 * may be handed GatheredTensors, which reach the worker as WireTensors.
 */
export const ONNX_RUN = 'run'
export interface OnnxRunArgs {
  inputs: Record<string, WireTensor | GatheredTensor>
  outputs?: string[]
}
export type OnnxRunResult = Record<string, WireTensor>
