import { BundleError } from '../errors/index.js'
import { ModelStore, type ModelInfo } from '../store/index.js'
import { Dispatcher, type Slice } from './batching/dispatcher.js'
import type { WireTensor } from './pool/protocol.js'
import { mergeOverrides, type RunnerOverrides } from './config.js'
import type { RunnerMetrics } from './metrics.js'
import { WorkerPool } from './pool/worker-pool.js'
import { gpuDevices } from './gpu/devices.js'
import { placeWorkers, type GpuRequest } from './gpu/placement.js'
import { concatRows, fromWire, sliceRows, toWire, type RunnerTensor } from './tensor.js'

// Device discovery runs only for runners that ask for a GPU (nvidia-smi costs a process spawn).
const devicesFor = (gpu: GpuRequest | undefined): string[] => (gpu === undefined || gpu === 0 ? [] : gpuDevices())

export interface BatchingOptions {
  enabled?: boolean
  /** Most rows per batch (default 32). */
  maxBatchSize?: number
  /** Queue wait plus execution bound per request (default 100 ms). */
  maxLatencyMs?: number
}

export interface OnnxRunnerOptions {
  /** Runner name (default: the model name). */
  name?: string
  batching?: BatchingOptions
  workers?: number
  /** A batch running longer than this fails with 504 and its worker is recycled (default 30 s). */
  timeoutMs?: number
  executionProviders?: string[]
  intraOpThreads?: number
  /** Model store directory (default $BUNDLE_HOME). */
  home?: string
  /** `gpu`: devices per worker (1, 2), a fraction to pack workers (0.5), or a device list. */
  resources?: { gpu?: GpuRequest }
}

type Inputs = Record<string, RunnerTensor>
type Outputs = Record<string, RunnerTensor>
type Request = Record<string, WireTensor>

/**
 * A model from the store, run by onnxruntime-node in worker processes behind the adaptive
 * batcher. The exact version is pinned when the runner starts.
 *
 * @example
 * const cls = onnxRunner('ocr-cls:latest', { batching: { maxBatchSize: 32, maxLatencyMs: 50 }, workers: 1 })
 * const { 'softmax_0.tmp_0': probs } = await cls.run({ x })
 */
export class OnnxRunner {
  readonly name: string
  model: ModelInfo | undefined
  private pool: WorkerPool | undefined
  private dispatcher: Dispatcher<Request, Request> | undefined
  private metrics: RunnerMetrics | undefined

  /** Operator overrides (serve config file, environment), applied before start. */
  configure(overrides: RunnerOverrides): void {
    this.options = mergeOverrides(this.options, overrides)
  }

  /** The options this runner runs with, after overrides; the model version once started. */
  effectiveConfig(): Record<string, unknown> {
    const { home: _home, ...options } = this.options
    return { kind: 'onnx', tag: this.tag, ...(this.model ? { model: this.model.tag, digest: this.model.digest } : {}), workers: 1, timeoutMs: 30_000, ...options, batching: { enabled: true, maxBatchSize: 32, maxLatencyMs: 100, ...options.batching } }
  }

  /** Called by the server before start: batches, waits and rejections feed its /metrics. */
  attachMetrics(metrics: RunnerMetrics): void {
    this.metrics = metrics
  }

  queueDepth(): Record<string, number> {
    return { run: this.dispatcher?.stats().queuedRows ?? 0 }
  }

  restarts(): number {
    return this.pool?.restarts ?? 0
  }

  constructor(
    readonly tag: string,
    private options: OnnxRunnerOptions = {},
  ) {
    this.name = options.name ?? tag.split(/[:@]/)[0]!
  }

  async start(): Promise<void> {
    const store = ModelStore.open(this.options.home ? { home: this.options.home } : {})
    try {
      const onnx = store.get(this.tag).files.find((f) => f.path.endsWith('.onnx'))
      if (onnx === undefined) throw new BundleError('E_STORE_FRAMEWORK_INVALID', `model ${this.tag} has no .onnx file`)
      const { model, files } = await store.paths(this.tag)
      this.model = model
      const workers = this.options.workers ?? 1
      // GPU workers each see only their devices (CUDA_VISIBLE_DEVICES) and ask for CUDA.
      const placement = placeWorkers(workers, this.options.resources?.gpu, devicesFor(this.options.resources?.gpu))
      const providers = this.options.executionProviders ?? (placement ? ['cuda'] : undefined)
      this.pool = new WorkerPool({
        ...(placement ? { env: (i: number) => ({ CUDA_VISIBLE_DEVICES: placement[i]!.join(',') }) } : {}),
        runner: this.name,
        workers,
        timeoutMs: this.options.timeoutMs ?? 30_000,
        backend: { kind: 'onnx', modelPath: files[onnx.path]!, ...(providers ? { executionProviders: providers } : {}), ...(this.options.intraOpThreads ? { intraOpThreads: this.options.intraOpThreads } : {}) },
      })
      await this.pool.start()
      const b = this.options.batching ?? {}
      this.dispatcher = new Dispatcher<Request, Request>(
        { maxBatchSize: b.maxBatchSize ?? 32, maxLatencyMs: b.maxLatencyMs ?? 100, slots: workers, batching: b.enabled ?? true, ...(this.metrics ? { observer: this.metrics.observer(this.name, 'run') } : {}) },
        (slices, rows) => this.execute(slices, rows),
      )
    } finally {
      store.close()
    }
  }

  ready(): boolean {
    return this.pool?.ready() ?? false
  }

  /** Concatenates the slices along dimension 0, runs one batch, splits the outputs back. */
  private async execute(slices: readonly Slice<Request>[], _rows: number): Promise<Request[]> {
    const names = Object.keys(slices[0]!.payload)
    const inputs = Object.fromEntries(names.map((n) => [n, concatRows(slices.map((s) => sliceRows(s.payload[n]!, s.start, s.rows)))]))
    const out = (await this.pool!.run('run', { inputs })) as Request
    let at = 0
    return slices.map((s) => {
      const part = Object.fromEntries(Object.entries(out).map(([k, t]) => [k, sliceRows(t, at, s.rows)]))
      at += s.rows
      return part
    })
  }

  /** Runs the model on `inputs` (batch dimension first); results keep the request's rows. */
  async run(inputs: Inputs): Promise<Outputs> {
    if (this.dispatcher === undefined) throw new BundleError('E_RUNNER_STOPPED', `runner ${this.name} is not started`)
    const wire = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, toWire(t)]))
    const first = Object.values(wire)[0]
    if (first === undefined) throw new BundleError('E_INPUT_INVALID', `runner ${this.name} got no inputs`)
    const rows = first.shape[0] ?? 1
    // Only requests whose non-batch dimensions and dtypes agree may share a batch.
    const key = Object.entries(wire).map(([k, t]) => `${k}:${t.dtype}:${t.shape.slice(1).join('x')}`).join('|')
    const parts = await this.dispatcher.submit(wire, rows, key)
    const names = Object.keys(parts[0]!)
    return Object.fromEntries(names.map((n) => [n, fromWire(concatRows(parts.map((p) => p[n]!)))]))
  }

  async stop(): Promise<void> {
    this.dispatcher?.close()
    await this.pool?.stop()
  }
}

export const onnxRunner = (tag: string, options: OnnxRunnerOptions = {}): OnnxRunner => new OnnxRunner(tag, options)
