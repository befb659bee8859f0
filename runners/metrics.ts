import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { DispatchObserver, RejectReason } from './batching/dispatcher.js'

const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
const TIME_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** What a runner exposes so the server can publish it: per method, a dispatcher and its stats. */
export interface RunnerMetricsSource {
  readonly name: string
  /** Queue depth (rows) per method, read at scrape time. */
  queueDepth(): Record<string, number>
  /** Worker restarts since start, read at scrape time. */
  restarts(): number
  /** Whether the model is in memory (false while unloaded for idleness). */
  loaded?(): boolean
  /** Times the model was unloaded for idleness. */
  idleUnloads?(): number
  /** Live worker processes (autoscaling moves it). */
  workers?(): number
  /** Remote mode: live remote workers and batches waiting in Redis for one. */
  remote?(): { workers: number; queued: number } | undefined
}

type Labels = 'service' | 'runner' | 'method'

/**
 * The runner series on a server's registry (created once per registry), and an observer per
 * runner method that feeds them. Scrape-time gauges read queue depth and restarts directly.
 */
export class RunnerMetrics {
  private readonly batchSize: Histogram<Labels>
  private readonly queueTime: Histogram<Labels>
  private readonly execTime: Histogram<Labels>
  private readonly rows: Counter<Labels>
  private readonly batches: Counter<Labels>
  private readonly rejected: Counter<Labels | 'reason'>
  private readonly cacheHits: Counter<'service' | 'runner'>
  private readonly cacheMisses: Counter<'service' | 'runner'>

  constructor(
    registry: Registry,
    private readonly service: string,
    sources: () => readonly RunnerMetricsSource[],
  ) {
    const r = [registry]
    this.batchSize = new Histogram({ name: 'bundle_runner_batch_size', help: 'Rows per executed batch', labelNames: ['service', 'runner', 'method'], buckets: BATCH_BUCKETS, registers: r })
    this.queueTime = new Histogram({ name: 'bundle_runner_queue_duration_seconds', help: 'Time a request waited in the batching queue', labelNames: ['service', 'runner', 'method'], buckets: TIME_BUCKETS, registers: r })
    this.execTime = new Histogram({ name: 'bundle_runner_execution_duration_seconds', help: 'Time a batch took in the worker, IPC included', labelNames: ['service', 'runner', 'method'], buckets: TIME_BUCKETS, registers: r })
    this.rows = new Counter({ name: 'bundle_runner_inference_total', help: 'Rows run through the model', labelNames: ['service', 'runner', 'method'], registers: r })
    this.batches = new Counter({ name: 'bundle_runner_execution_total', help: 'Batches executed', labelNames: ['service', 'runner', 'method'], registers: r })
    this.rejected = new Counter({ name: 'bundle_runner_rejected_total', help: 'Requests shed by the batcher (reason: queue_full, admission, deadline)', labelNames: ['service', 'runner', 'method', 'reason'], registers: r })
    this.cacheHits = new Counter({ name: 'bundle_runner_cache_hits_total', help: 'Requests answered from the response cache (no queue, no model)', labelNames: ['service', 'runner'], registers: r })
    this.cacheMisses = new Counter({ name: 'bundle_runner_cache_misses_total', help: 'Requests the response cache did not hold (run, then stored)', labelNames: ['service', 'runner'], registers: r })
    const svc = service
    new Gauge({
      name: 'bundle_runner_queue_depth',
      help: 'Rows waiting in the batching queue',
      labelNames: ['service', 'runner', 'method'],
      registers: r,
      collect() {
        for (const s of sources()) for (const [method, depth] of Object.entries(s.queueDepth())) this.set({ service: svc, runner: s.name, method }, depth)
      },
    })
    new Gauge({
      name: 'bundle_runner_workers',
      help: 'Live worker processes of the runner (autoscaling between minWorkers and maxWorkers moves it)',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) if (s.workers) this.set({ service: svc, runner: s.name }, s.workers())
      },
    })
    new Gauge({
      name: 'bundle_runner_remote_workers',
      help: 'Remote workers (bundle worker) serving the runner queue, by their heartbeats',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) {
          const remote = s.remote?.()
          if (remote) this.set({ service: svc, runner: s.name }, remote.workers)
        }
      },
    })
    new Gauge({
      name: 'bundle_runner_remote_queue_depth',
      help: 'Batches waiting in Redis for a remote worker',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) {
          const remote = s.remote?.()
          if (remote) this.set({ service: svc, runner: s.name }, remote.queued)
        }
      },
    })
    new Gauge({
      name: 'bundle_runner_loaded',
      help: 'Whether the runner model is in memory (0 while unloaded for idleness or stopped)',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) if (s.loaded) this.set({ service: svc, runner: s.name }, s.loaded() ? 1 : 0)
      },
    })
    new Gauge({
      name: 'bundle_runner_idle_unloads',
      help: 'Times the runner model was unloaded after being idle (it loads again on the next request)',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) if (s.idleUnloads) this.set({ service: svc, runner: s.name }, s.idleUnloads())
      },
    })
    new Gauge({
      name: 'bundle_runner_worker_restarts',
      help: 'Runner worker processes restarted after a crash or timeout',
      labelNames: ['service', 'runner'],
      registers: r,
      collect() {
        for (const s of sources()) this.set({ service: svc, runner: s.name }, s.restarts())
      },
    })
  }

  /** A response-cache lookup: answered from the cache, or not. */
  cacheLookup(runner: string, hit: boolean): void {
    ;(hit ? this.cacheHits : this.cacheMisses).inc({ service: this.service, runner })
  }

  observer(runner: string, method: string): DispatchObserver {
    const labels = { service: this.service, runner, method }
    for (const reason of ['queue_full', 'admission', 'deadline'] satisfies RejectReason[]) this.rejected.inc({ ...labels, reason }, 0)
    this.rows.inc(labels, 0)
    this.batches.inc(labels, 0)
    return {
      batch: (rows, waited, ms, ok) => {
        this.batchSize.observe(labels, rows)
        for (const w of waited) this.queueTime.observe(labels, w / 1000)
        this.execTime.observe(labels, ms / 1000)
        if (ok) {
          this.rows.inc(labels, rows)
          this.batches.inc(labels)
        }
      },
      rejected: (reason) => this.rejected.inc({ ...labels, reason }),
    }
  }
}

