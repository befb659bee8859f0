import { Gauge, type Registry } from 'prom-client'
import { CounterFamily, HistogramFamily, type CounterSeries } from './series.js'
import { performance } from 'node:perf_hooks'
import type { DispatchObserver, RejectReason } from './batching/dispatcher.js'
import { LoopBusy } from './batching/load.js'

const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
const TIME_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** A runner's live state as metrics publish it, read at scrape time. */
export interface RunnerHealth {
  /** Whether the model is in memory now (false while unloaded for idleness, or stopped). */
  loaded: boolean
  /** Times the model was unloaded for idleness. */
  idleUnloads: number
  /** Live workers (the autoscaler moves it; in remote mode, remote workers by their heartbeats). */
  workers: number
  /** Workers restarted after a crash or a timeout. */
  restarts: number
  /**
   * Remote mode: live remote workers, batches waiting in Redis for one, and the workers the load
   * this replica sends needs (its rows offered ÷ rows one worker sustains within the deadline).
   */
  remote?: { workers: number; queued: number; desiredWorkers?: number }
  /** Sequence runners (stateful models): sequences whose state their workers hold now. */
  sequences?: { active: number }
  /** Runners placed on GPUs: device id → its workers there. */
  gpus?: Record<string, number>
}

/** What metrics read of a runner at scrape time: its queues and its health (every Runner is one). */
export interface RunnerMetricsSource {
  readonly name: string
  /** Rows waiting per method. */
  queueDepth(): Record<string, number>
  health(): RunnerHealth
  /** Replicas' worth of work offered to its busiest method (Dispatcher.load); undefined: not known yet. */
  loadRatio?(): number | undefined
}

/** Per-runner gauges read from health() at scrape time; undefined: no sample for that runner. */
const HEALTH_GAUGES: readonly (readonly [name: string, help: string, read: (h: RunnerHealth) => number | undefined])[] =
  [
    [
      'bundle_runner_workers',
      'Live worker processes of the runner (autoscaling between minWorkers and maxWorkers moves it)',
      (h) => h.workers,
    ],
    [
      'bundle_runner_remote_workers',
      'Remote workers (bundle worker) serving the runner queue, by their heartbeats',
      (h) => h.remote?.workers,
    ],
    ['bundle_runner_remote_queue_depth', 'Batches waiting in Redis for a remote worker', (h) => h.remote?.queued],
    [
      'bundle_runner_desired_workers',
      'Remote workers the load this replica sends the runner needs: rows offered per second (refused ones ' +
        'included) over the last 10 s ÷ rows per second one worker sustains within the deadline; at least 1 while ' +
        'a batch waits with no worker live, or rows come before any batch was timed. Summed over replicas: the ' +
        'workers the fleet needs',
      (h) => h.remote?.desiredWorkers,
    ],
    [
      'bundle_runner_loaded',
      'Whether the runner model is in memory (0 while unloaded for idleness or stopped)',
      (h) => (h.loaded ? 1 : 0),
    ],
    [
      'bundle_runner_idle_unloads',
      'Times the runner model was unloaded after being idle (it loads again on the next request)',
      (h) => h.idleUnloads,
    ],
    ['bundle_runner_worker_restarts', 'Runner worker processes restarted after a crash or timeout', (h) => h.restarts],
    [
      'bundle_runner_sequences_active',
      'Sequences whose state a sequence runner holds now (started, not ended or evicted)',
      (h) => h.sequences?.active,
    ],
  ]

/**
 * The runner series on a server's registry (created once per registry), and an observer per
 * runner method that feeds them. Scrape-time gauges read queue depth and restarts directly.
 */
export class RunnerMetrics {
  // Updated per batch and per refusal: plain series (series.ts), read at scrape time.
  private readonly batchSize: HistogramFamily
  private readonly queueTime: HistogramFamily
  private readonly execTime: HistogramFamily
  private readonly rows: CounterFamily
  private readonly batches: CounterFamily
  private readonly rejected: CounterFamily
  private readonly cancelled: CounterFamily
  private readonly cacheHits: CounterFamily
  private readonly cacheMisses: CounterFamily
  private readonly sequencesEvicted: CounterFamily
  private readonly sequencesLost: CounterFamily

  constructor(
    registry: Registry,
    private readonly service: string,
    sources: () => readonly RunnerMetricsSource[],
  ) {
    const r = [registry]
    this.batchSize = new HistogramFamily('bundle_runner_batch_size', 'Rows per executed batch', registry, BATCH_BUCKETS)
    this.queueTime = new HistogramFamily(
      'bundle_runner_queue_duration_seconds',
      'Time a request waited in the batching queue',
      registry,
      TIME_BUCKETS,
    )
    this.execTime = new HistogramFamily(
      'bundle_runner_execution_duration_seconds',
      'Time a batch took in the worker, IPC included',
      registry,
      TIME_BUCKETS,
    )
    this.rows = new CounterFamily('bundle_runner_inference_total', 'Rows run through the model', registry)
    this.batches = new CounterFamily('bundle_runner_execution_total', 'Batches executed', registry)
    this.rejected = new CounterFamily(
      'bundle_runner_rejected_total',
      'Requests shed by the batcher (reason: queue_full, admission, deadline)',
      registry,
    )
    this.cancelled = new CounterFamily(
      'bundle_runner_cancelled_total',
      'Requests dropped from the batching queue unrun: their client had gone (connection, stream or WebSocket closed)',
      registry,
    )
    this.cacheHits = new CounterFamily(
      'bundle_runner_cache_hits_total',
      'Requests answered from the response cache (no queue, no model)',
      registry,
    )
    this.cacheMisses = new CounterFamily(
      'bundle_runner_cache_misses_total',
      'Requests the response cache did not hold (run, then stored)',
      registry,
    )
    this.sequencesEvicted = new CounterFamily(
      'bundle_runner_sequences_evicted_total',
      'Sequences of a sequence runner evicted (state freed) after being idle longer than sequence.idleTimeoutMs',
      registry,
    )
    this.sequencesLost = new CounterFamily(
      'bundle_runner_sequences_lost_total',
      'Sequences of a sequence runner whose state was lost with its worker (crash, timeout) or a model swap',
      registry,
    )
    const svc = service
    new Gauge({
      name: 'bundle_runner_queue_depth',
      help: 'Rows waiting in the batching queue',
      labelNames: ['service', 'runner', 'method'],
      registers: r,
      collect() {
        for (const s of sources())
          for (const [method, depth] of Object.entries(s.queueDepth()))
            this.set({ service: svc, runner: s.name, method }, depth)
      },
    })
    desiredReplicasGauge(r, svc, sources)
    for (const [name, help, read] of HEALTH_GAUGES) {
      new Gauge({
        name,
        help,
        labelNames: ['service', 'runner'],
        registers: r,
        collect() {
          for (const s of sources()) {
            const v = read(s.health())
            if (v !== undefined) this.set({ service: svc, runner: s.name }, v)
          }
        },
      })
    }
  }

  /** A response-cache lookup: answered from the cache, or not. */
  cacheLookup(runner: string, hit: boolean): void {
    ;(hit ? this.cacheHits : this.cacheMisses).labels({ service: this.service, runner }).value++
  }

  /** Sequences evicted for idleness (`evicted`) or lost with their worker (`lost`). */
  sequences(runner: string, what: 'evicted' | 'lost', n: number): void {
    ;(what === 'evicted' ? this.sequencesEvicted : this.sequencesLost).labels({
      service: this.service,
      runner,
    }).value += n
  }

  observer(runner: string, method: string): DispatchObserver {
    const labels = { service: this.service, runner, method }
    const rejected = Object.fromEntries(
      (['queue_full', 'admission', 'deadline'] satisfies RejectReason[]).map((reason) => [
        reason,
        this.rejected.labels({ ...labels, reason }),
      ]),
    ) as Record<RejectReason, CounterSeries>
    const cancelled = this.cancelled.labels(labels)
    const rowsDone = this.rows.labels(labels)
    const batchesDone = this.batches.labels(labels)
    const batchSize = this.batchSize.labels(labels)
    const queueTime = this.queueTime.labels(labels)
    const execTime = this.execTime.labels(labels)
    return {
      batch: (rows, waited, ms, ok) => {
        batchSize.observe(rows)
        for (const w of waited) queueTime.observe(w / 1000)
        execTime.observe(ms / 1000)
        if (ok) {
          rowsDone.value += rows
          batchesDone.value++
        }
      },
      rejected: (reason) => void rejected[reason].value++,
      cancelled: () => void cancelled.value++,
    }
  }
}

/**
 * bundle_desired_replicas: the load this replica sees, in replicas — the busiest local runner's rows
 * offered ÷ rows sustained (Dispatcher.load), or the API process's own event loop busy share when
 * that is higher (HTTP handling, decoding: a replica whose runners are idle can still be full).
 * What an autoscaler sums over replicas.
 */
function desiredReplicasGauge(
  registers: Registry[],
  service: string,
  sources: () => readonly RunnerMetricsSource[],
): void {
  const loop = new LoopBusy(
    () => performance.eventLoopUtilization(),
    () => performance.now(),
  )
  new Gauge({
    name: 'bundle_desired_replicas',
    help:
      'Replicas the load this replica sees needs: rows offered per second (refused ones included) over the last ' +
      '10 s ÷ rows per second its workers sustain within the deadline, for its busiest local runner (remote ' +
      'runners: bundle_runner_desired_workers), or the share of time its API process was busy if higher. Summed ' +
      'over replicas: how many the fleet needs ' +
      '(scale on sum(bundle_desired_replicas) with a target below 1)',
    labelNames: ['service'],
    registers,
    collect() {
      let need = loop.read()
      for (const s of sources()) need = Math.max(need, s.loadRatio?.() ?? 0)
      this.set({ service }, need)
    },
  })
}
