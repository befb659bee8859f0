import { siblingModule } from '../pool/backend.js'
import type { BackendSpec } from '../pool/protocol.js'
import type { OnnxBackendOptions } from '../onnx/backend.js'

// What the API side knows of a model host (./host-backend.ts, loaded only in host workers): one
// worker process holding many onnxruntime sessions, each opened and closed by a call. A hosted
// model's calls are the onnx backend's methods with the model's id after an `@`.

export const hostBackend = (): BackendSpec => ({
  module: siblingModule(new URL('./host-backend.js', import.meta.url)),
  options: {},
})

export const HOST_OPEN = 'open'
export const HOST_CLOSE = 'close'
export const HOST_MEMORY = 'memory'

export interface HostOpenArgs extends OnnxBackendOptions {
  id: string
}

/** The host's resident memory before and after the session opened (what loading it cost). */
export interface HostOpenResult {
  rssBefore: number
  rssAfter: number
  inputs: readonly string[]
  outputs: readonly string[]
}

/** The name a hosted model's method goes by in its host. */
export const hostedMethod = (method: string, id: string): string => `${method}@${id}`
