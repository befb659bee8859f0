// First: decorators need Symbol.metadata, which Node 20 lacks.
import './metadata-polyfill.js'

export {
  api,
  definitionOf,
  onShutdown,
  onStartup,
  service,
  task,
  type ApiOptions,
  type TaskOptions,
} from './service/decorators.js'
export { defineApi, defineService, type DefineServiceOptions, type DefinedApi } from './service/define.js'
export type {
  ApiContext,
  ApiDefinition,
  RunnerDeclaration,
  ServiceDefinition,
  ServiceOptions,
  TrafficOptions,
} from './service/definition.js'
export { io } from './io/index.js'
export type {
  DType,
  FileValue,
  IODescriptor,
  Image,
  ImageOptions,
  ImageResize,
  InputOf,
  MultipartOptions,
  OutputOf,
  StreamDescriptor,
  Tensor,
  TypedArrayOf,
} from './io/index.js'
export { createServiceApp, type AppOptions, type Phase, type ServiceApp } from './server/app.js'
export type { ServedModel } from './server/v2/repository.js'
export type { IndexRow } from './server/v2/repository-entry.js'
export { openapiDocument } from './server/openapi.js'
export { serve, type RunningServer, type ServeOptions } from './server/serve.js'
export {
  createClient,
  type CallInit,
  type ClientOptions,
  type ClientOutput,
  type ServiceClient,
} from './client/create-client.js'
export type { BinaryInput, ClientInput, ClientValue, TensorInput, TensorValues } from './client/wire-types.js'
export { BundleError, isBundleError, type ErrorCode } from '../errors/index.js'
export {
  onnxRunner,
  OnnxRunner,
  customRunner,
  CustomRunner,
  backendRunner,
  BackendRunner,
  ensemble,
  Ensemble,
  type OnnxRunnerOptions,
  type CustomRunnerOptions,
  type BackendRunnerOptions,
  type BackendSource,
  type Backend,
  type BackendContext,
  type BackendMethod,
  type BackendModule,
  type WireTensor,
  type BatchingOptions,
  type RunnerTensor,
  type EnsembleOptions,
  type EnsembleStep,
  type Runner,
  type RunnerHealth,
  type RunnerKind,
  type RunOptions,
  type SequenceFrame,
  type SequenceId,
  type SequenceOptions,
  type SequenceStateOptions,
} from '../runners/index.js'
