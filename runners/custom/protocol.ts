import { siblingModule } from '../pool/backend.js'
import type { BackendSpec } from '../pool/protocol.js'
import type { CustomBackendOptions } from './backend.js'

/** The custom backend (./backend.ts, loaded only in workers) for a class or object `exportName` of `module`. */
export const customBackend = (options: CustomBackendOptions): BackendSpec => ({
  module: siblingModule(new URL('./backend.js', import.meta.url)),
  options,
})
