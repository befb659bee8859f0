import { BundleError } from '../../errors/index.js'
import type { TraceCarrier } from '../tracing/index.js'
import type { Pool } from '../pool/pool.js'
import { runWarmup, type Warmup } from '../pool/pool-worker.js'
import type { OnnxBackendOptions } from '../onnx/backend.js'
import type { ModelHost } from './model-host.js'

let nextId = 1

/**
 * One model version in a shared model host, as its runner's pool: the runner's batcher sends its
 * batches here as it would to workers of its own. `start` opens the model (and runs its warm-up);
 * `stop` waits for its calls in flight, then closes it, giving its memory back to the host.
 */
export class HostedPool implements Pool {
  readonly kind = 'process' as const
  readonly gathers = true
  readonly size = 1
  private readonly id: string
  private open = false
  private stopping = false
  private inFlight = 0
  private settled: (() => void) | undefined
  /** What opening the model cost its host (resident memory), once started. */
  bytes = 0

  constructor(
    private readonly host: ModelHost,
    private readonly o: {
      runner: string
      backend: OnnxBackendOptions
      warmup?: Warmup | undefined
      /** The host died with the model in it. */
      onLost: () => void
    },
  ) {
    this.id = `${o.runner}#${nextId++}`
  }

  async start(): Promise<void> {
    const opened = await this.host.open(this.id, this.o.backend, () => {
      this.open = false
      this.o.onLost()
    })
    this.bytes = opened.bytes
    this.open = true
    await this.warm()
  }

  ready(): boolean {
    return this.open && !this.stopping
  }

  notReadyReason(): string | undefined {
    return undefined
  }

  run(method: string, args: unknown, timing?: (ms: number) => void, trace?: TraceCarrier[]): Promise<unknown> {
    if (this.stopping)
      return Promise.reject(new BundleError('E_RUNNER_STOPPED', `runner ${this.o.runner} is unloading`))
    this.inFlight++
    return this.host.run(this.id, method, args, timing, trace).finally(() => {
      if (--this.inFlight === 0) this.settled?.()
    })
  }

  async stop(): Promise<void> {
    this.stopping = true
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.settled = resolve))
    this.open = false
    await this.host.close(this.id)
  }

  /** The warm-up steps, as a worker of its own would run them (pool-worker.ts). */
  private async warm(): Promise<void> {
    const w = this.o.warmup
    if (w === undefined) return
    const call = async (args: unknown) => {
      let ms = 0
      await this.host.run(this.id, w.method, args, (t) => (ms = t))
      return ms
    }
    try {
      await runWarmup(w, call, () => this.open)
    } catch (err) {
      await this.host.close(this.id)
      this.open = false
      throw err
    }
  }
}
