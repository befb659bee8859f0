import { execFile } from 'node:child_process'
import { Counter, Gauge, type Registry } from 'prom-client'
import { BundleError } from '../../errors/index.js'
import { parseNvidiaSmi } from './devices.js'
import { type GpuSample, queryGpus } from './query.js'

/** Where a runner's workers run: device id → workers on it (from its placement). */
export interface GpuPlacement {
  runner: string
  gpus: Record<string, number>
}

export interface GpuMonitorOptions {
  /** How often nvidia-smi is asked (default 5 s; BUNDLE_GPU_METRICS_INTERVAL_MS). */
  intervalMs?: number
  /** The runners' placements, read at scrape time. */
  placements: () => readonly GpuPlacement[]
  /** A sample that failed (nvidia-smi gone, timed out): counted, and told here once in a row. */
  onError?: (err: unknown) => void
  query?: () => Promise<GpuSample[]>
}

const FIGURES: readonly [name: string, help: string, read: (s: GpuSample) => number | undefined][] = [
  [
    'bundle_gpu_utilization_ratio',
    "Share of time a kernel ran on the GPU over nvidia-smi's last period (0–1)",
    (s) => s.utilization,
  ],
  ['bundle_gpu_memory_used_bytes', 'GPU memory in use', (s) => s.memoryUsedBytes],
  ['bundle_gpu_memory_total_bytes', 'GPU memory in all', (s) => s.memoryTotalBytes],
  ['bundle_gpu_power_watts', 'GPU power draw', (s) => s.powerWatts],
  ['bundle_gpu_power_limit_watts', 'GPU power limit', (s) => s.powerLimitWatts],
]

/**
 * Per-GPU figures in Prometheus, as Triton publishes them (utilisation, memory used and total,
 * power and its limit), from `nvidia-smi --query-gpu` every few seconds, plus which runners'
 * workers run on each device. Scrapes read the last sample: a scrape never waits on nvidia-smi.
 */
export class GpuMonitor {
  private last: GpuSample[] = []
  private timer: NodeJS.Timeout | undefined
  private failing = false
  private readonly failures: Counter
  private readonly query: () => Promise<GpuSample[]>

  constructor(
    registry: Registry,
    service: string,
    private readonly o: GpuMonitorOptions,
  ) {
    this.query = o.query ?? queryGpus
    const samples = () => this.last
    for (const [name, help, read] of FIGURES)
      new Gauge({
        name,
        help,
        labelNames: ['service', 'gpu', 'uuid', 'name'],
        registers: [registry],
        collect() {
          this.reset() // a GPU that left (or a figure it stopped giving) leaves no stale series
          for (const s of samples()) {
            const v = read(s)
            if (v !== undefined) this.set({ service, gpu: s.index, uuid: s.uuid, name: s.name }, v)
          }
        },
      })
    const placements = o.placements
    new Gauge({
      name: 'bundle_gpu_runner_workers',
      help: 'Runner workers placed on each GPU (a fractional resources.gpu packs several on one)',
      labelNames: ['service', 'gpu', 'runner'],
      registers: [registry],
      collect() {
        this.reset()
        for (const p of placements())
          for (const [gpu, workers] of Object.entries(p.gpus)) this.set({ service, gpu, runner: p.runner }, workers)
      },
    })
    this.failures = new Counter({
      name: 'bundle_gpu_sample_failures_total',
      help: 'Times nvidia-smi could not be read (the GPU figures then keep their last sample)',
      labelNames: ['service'],
      registers: [registry],
    })
    this.failures.labels(service).inc(0)
    this.service = service
  }

  private readonly service: string

  /** Takes a first sample, then one every intervalMs (the timer never keeps the process alive). */
  async start(): Promise<void> {
    await this.sample()
    const every = this.o.intervalMs ?? 5_000
    this.timer = setInterval(() => void this.sample(), every)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  /** The last sample (GET /runners and tests read it). */
  samples(): readonly GpuSample[] {
    return this.last
  }

  private async sample(): Promise<void> {
    try {
      this.last = await this.query()
      this.failing = false
    } catch (err) {
      this.failures.labels(this.service).inc()
      if (!this.failing) this.o.onError?.(err)
      this.failing = true
    }
  }
}

/** Whether nvidia-smi lists a GPU on this machine (a machine without nvidia-smi has none). */
export function hasGpu(): Promise<boolean> {
  return new Promise((resolve) =>
    execFile('nvidia-smi', ['-L'], { timeout: 5_000, encoding: 'utf8' }, (err, stdout) =>
      resolve(!err && parseNvidiaSmi(stdout).length > 0),
    ),
  )
}

/**
 * GPU metrics for a server: started only when this machine has a GPU and BUNDLE_GPU_METRICS is
 * not 0, so a machine without one runs nothing for them (not even a timer).
 */
export async function startGpuMonitor(
  registry: Registry,
  service: string,
  o: GpuMonitorOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<GpuMonitor | undefined> {
  const interval = gpuMetricsInterval(env)
  if (env.BUNDLE_GPU_METRICS === '0' || !(await hasGpu())) return undefined
  const monitor = new GpuMonitor(registry, service, {
    ...o,
    ...(interval !== undefined ? { intervalMs: interval } : {}),
  })
  await monitor.start()
  return monitor
}

/** BUNDLE_GPU_METRICS_INTERVAL_MS, checked (the server checks it before it listens). */
export function gpuMetricsInterval(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.BUNDLE_GPU_METRICS_INTERVAL_MS
  if (raw === undefined) return undefined
  const ms = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(ms) || ms < 100)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `BUNDLE_GPU_METRICS_INTERVAL_MS must be a number of milliseconds of at least 100, got ${JSON.stringify(raw)}`,
    )
  return ms
}
