import { BundleError } from '../../errors/index.js'
import type { TraceCarrier } from '../tracing/index.js'
import { WorkerPool, type PoolOptions } from '../pool/worker-pool.js'
import type { OnnxBackendOptions } from '../onnx/backend.js'
import { HOST_CLOSE, HOST_MEMORY, HOST_OPEN, type HostOpenResult, hostBackend, hostedMethod } from './protocol.js'

export interface ModelHostOptions {
  /** Host processes (default 2): calls of models on one host run one after the other. */
  hosts?: number
  /** A call running longer than this fails and its host is replaced (its models with it). */
  timeoutMs?: number
  output?: PoolOptions['output']
}

/** A model open in a host: where it is and what opening it cost. */
export interface HostedModel {
  id: string
  host: number
  /** The host's resident memory growth while the session opened. */
  bytes: number
  inputs: readonly string[]
  outputs: readonly string[]
}

/**
 * Worker processes that each hold many models (sessions), so that a model on demand costs its
 * session and not a process of its own: a Node.js process with onnxruntime loaded is ~60 MB before
 * any model, more than most models it would hold (docs/memory.md has the measurements). A model
 * goes to the host holding the fewest bytes. A host that crashes is restarted empty: the models
 * it held are told (`onLost`) and load again on their next request.
 */
export class ModelHost {
  private readonly pool: WorkerPool
  private readonly placed = new Map<string, HostedModel>()
  private readonly lost = new Map<string, () => void>()
  readonly hosts: number

  constructor(o: ModelHostOptions = {}) {
    this.hosts = Math.max(1, o.hosts ?? 2)
    this.pool = new WorkerPool({
      runner: 'model-host',
      workers: this.hosts,
      backend: hostBackend(),
      ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
      ...(o.output ? { output: o.output } : {}),
      // Each host runs one call at a time; a second in hand keeps it busy between them.
      depth: 2,
      // glibc raises its mmap threshold as large blocks are freed, and then keeps later ones in a heap it
      // never shrinks: a closed session's memory would stay with the host. Fixed at 128 KiB, a model's
      // weights and arenas are mappings of their own and go back to the system when it closes.
      env: () => ({ MALLOC_MMAP_THRESHOLD_: '131072' }),
      onEvent: (e) => {
        if (e.type === 'crash' || e.type === 'timeout') this.hostLost(e.index)
      },
    })
  }

  start(): Promise<void> {
    return this.pool.start()
  }

  stop(): Promise<void> {
    return this.pool.stop()
  }

  /** The hosts' process ids (their memory is the models'). */
  pids(): number[] {
    return this.pool.pids()
  }

  /** Opens a model in the host holding the fewest bytes; `onLost` hears if that host dies. */
  async open(id: string, options: OnnxBackendOptions, onLost: () => void): Promise<HostedModel> {
    if (this.placed.has(id)) throw new Error(`model ${id} is already open in a host`)
    const ready = this.pool.readyWorkers()
    if (ready.length === 0)
      throw new BundleError('E_RUNNER_CRASHED', 'no model host is running now (one is restarting)')
    const held = (h: number) => [...this.placed.values()].filter((m) => m.host === h).reduce((a, m) => a + m.bytes, 0)
    const host = ready.reduce((a, b) => (held(b) < held(a) ? b : a))
    const r = (await this.pool.runOn(host, HOST_OPEN, { id, ...options })) as HostOpenResult
    const model: HostedModel = {
      id,
      host,
      bytes: Math.max(0, r.rssAfter - r.rssBefore),
      inputs: r.inputs,
      outputs: r.outputs,
    }
    this.placed.set(id, model)
    this.lost.set(id, onLost)
    return model
  }

  /** Releases a model's session in its host. */
  async close(id: string): Promise<void> {
    const m = this.placed.get(id)
    if (m === undefined) return
    this.placed.delete(id)
    this.lost.delete(id)
    await this.pool.runOn(m.host, HOST_CLOSE, { id })
  }

  /** Runs a hosted model's method on its host. */
  run(
    id: string,
    method: string,
    args: unknown,
    timing?: (ms: number) => void,
    trace?: TraceCarrier[],
  ): Promise<unknown> {
    const m = this.placed.get(id)
    if (m === undefined)
      return Promise.reject(new BundleError('E_RUNNER_CRASHED', `model ${id} is no longer open in a host`))
    return this.pool.runOn(m.host, hostedMethod(method, id), args, timing, trace)
  }

  isOpen(id: string): boolean {
    return this.placed.has(id)
  }

  /** Each host's resident memory and how many models it holds. */
  async memory(): Promise<{ host: number; rss: number; models: number }[]> {
    return Promise.all(
      this.pool.readyWorkers().map(async (host) => ({
        host,
        ...((await this.pool.runOn(host, HOST_MEMORY, {})) as { rss: number; models: number }),
      })),
    )
  }

  private hostLost(host: number): void {
    for (const [id, m] of [...this.placed]) {
      if (m.host !== host) continue
      this.placed.delete(id)
      const told = this.lost.get(id)
      this.lost.delete(id)
      told?.()
    }
  }
}
