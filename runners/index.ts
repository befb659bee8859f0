// Runners: models in worker processes behind adaptive batching. May import store/ and errors/.
export { onnxRunner, OnnxRunner, type OnnxRunnerOptions, type BatchingOptions } from './onnx-runner.js'
export { customRunner, CustomRunner, type CustomRunnerOptions, type CustomMethodOptions } from './custom-runner.js'
export { Dispatcher, type DispatcherOptions, type Slice } from './batching/dispatcher.js'
export { LatencyModel } from './batching/latency-model.js'
export { WorkerPool, type PoolOptions } from './pool/worker-pool.js'
export { TYPED_ARRAYS, type RunnerTensor, type RunnerDType } from './tensor.js'
export { RunnerMetrics, type RunnerMetricsSource } from './metrics.js'
export { envOverrides, mergeOverrides, parseServeConfig, validateOverrides, type RunnerOverrides } from './config.js'
