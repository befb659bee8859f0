// Runners: models in worker processes behind adaptive batching. May import store/ and errors/.
export { onnxRunner, OnnxRunner, type OnnxRunnerOptions, type BatchingOptions } from './onnx-runner.js'
export type {
  RunOptions,
  SequenceFrame,
  SequenceId,
  SequenceOptions,
  SequenceStateOptions,
} from './sequence/options.js'
export type { SequenceStats } from './sequence/batcher.js'
export { customRunner, CustomRunner, type CustomRunnerOptions, type CustomMethodOptions } from './custom-runner.js'
export { backendRunner, BackendRunner, type BackendRunnerOptions, type BackendSource } from './backend-runner.js'
export type { Backend, BackendContext, BackendMethod, BackendModule } from './pool/backend.js'
export type { WireTensor } from './pool/protocol.js'
export {
  isVersioned,
  type Runner,
  type RunnerHealth,
  type RunnerKind,
  type RunnerLog,
  type RunnerRemote,
  type RunnerVersions,
  type VersionedRunner,
} from './runner.js'
export { Dispatcher, refusalPace, type DispatcherOptions, type Slice } from './batching/dispatcher.js'
export { refusalReason } from './batching/refusal.js'
export { LatencyModel } from './batching/latency-model.js'
export { WorkerPool, type PoolOptions } from './pool/worker-pool.js'
export {
  TYPED_ARRAYS,
  decodeStrings,
  encodeStrings,
  type NumericTensor,
  type RunnerTensor,
  type RunnerDType,
  type StringTensor,
} from './tensor.js'
export { RunnerMetrics, type RunnerMetricsSource } from './metrics.js'
export { envOverrides, mergeOverrides, parseServeConfig, validateOverrides, type RunnerOverrides } from './config.js'
export type { InferenceModel, TensorSpec } from './inference.js'
export { FAILURE_REASONS, RunnerStats, type Duration, type FailureReason } from './stats.js'
export { undeclaredRunners } from './registry.js'
export { ortSeverity } from './pool/worker-output.js'
export { currentCall, withCallContext, type CallContext, type StageTimes } from './call-context.js'
export { PRIORITY, parseClientPriority, toPriority, type Priority, type PriorityName } from './batching/priority.js'
export {
  ensemble,
  Ensemble,
  planEnsemble,
  wireEnsemble,
  type EnsembleOptions,
  type EnsembleStep,
  type ModelResolver,
  type SignatureResolver,
} from './ensemble.js'
export { modelSignature } from './onnx/inference.js'
export { blocksBatching, decideBatching, type BatchPlan } from './onnx/batch-plan.js'
export { RedisLink } from './remote/link.js'
export {
  type HeldModel,
  holdersByModel,
  type ModelHolders,
  readHoldings,
  RemoteHoldings,
  reportHoldings,
  type WorkerHoldings,
} from './remote/holdings.js'
export { ModelMemory, type MemoryBudget } from './memory/model-memory.js'
export type { CacheRow } from './memory/model-cache.js'
export { parseBytes } from './memory/size.js'
export type { PolicyName } from './memory/policy.js'
export { RemotePool, queueName } from './remote/remote-pool.js'
export { RUN_RETRY_MS, serveQueue, type Executor, type RemoteWorkerOptions } from './remote/worker.js'
export type { RemoteTarget } from './remote/target.js'
export { isConnectionError, isTransportError, pack, unpack, type Packed } from './remote/payload.js'
export { startedQueue } from './remote/started-queue.js'
/** @internal BullMQ's types stay out of the published declarations (remote/libs.ts) */
export { bullmq } from './remote/libs.js'
export { CounterFamily, GaugeFamily, HistogramFamily, HistogramSeries, type CounterSeries } from './series.js'
export { realClock, type Clock } from './batching/clock.js'
export {
  GpuMonitor,
  gpuMetricsInterval,
  hasGpu,
  startGpuMonitor,
  type GpuMonitorOptions,
  type GpuPlacement,
} from './gpu/monitor.js'
export { parseGpuQuery, queryGpus, type GpuSample } from './gpu/query.js'
export {
  activeTracer,
  contextOf,
  endSpan,
  spanAround,
  startTracing,
  stopTracing,
  tracingSettings,
  type TraceCarrier,
  type TracingSettings,
} from './tracing/index.js'
export { memorySettings, type MemorySources } from './memory/settings.js'
export { modelTrust, setModelTrust } from './onnx/trust.js'
