import { ignore } from '../../errors/index.js'
import type { RedisLink } from './link.js'

// What each remote worker of `bundle worker --models` holds in memory, for the API servers'
// repository index (`/v2/repository/index`, `bundle models loaded`). Each worker rewrites its
// entry every second; an entry not rewritten for three seconds (on Redis's clock) is gone, as the
// heartbeats in capacity.ts.

const TTL_MS = 3_000
const key = (link: RedisLink, scope: string) => `${link.prefix}:holdings:${scope}`

/** One model as a worker holds it. */
export interface HeldModel {
  name: string
  /** loaded, loading or unloading (models not in memory are not reported). */
  state: string
  /** What loading it cost on that worker (measured), else its prediction. */
  bytes?: number
  /** When a batch last used it there (ms since the epoch, the worker's clock). */
  lastUsedAt?: number
}

/** A worker's report: its budget (when it has one) and the models it holds. */
export interface WorkerHoldings {
  worker: string
  /** Bytes its models may use (the budget less its own processes), when it runs under a budget. */
  capacityBytes?: number
  usedBytes?: number
  loads?: number
  evictions?: number
  models: HeldModel[]
}

/** A worker reports what it holds until the returned function is called. */
export function reportHoldings(
  link: RedisLink,
  scope: string,
  worker: string,
  now: () => Omit<WorkerHoldings, 'worker'>,
): () => Promise<void> {
  const write = () =>
    link
      .client()
      .hset(key(link, scope), worker, JSON.stringify({ ...now(), worker, until: link.now() + TTL_MS }))
      .catch(ignore('a missed report: the next one writes it, and a stale entry expires'))
  void write()
  const timer = setInterval(write, 1_000)
  timer.unref()
  return async () => {
    clearInterval(timer)
    await link.client().hdel(key(link, scope), worker).catch(ignore('the entry expires by itself'))
  }
}

/** The live workers' reports, by worker; stale entries are dropped. */
export async function readHoldings(link: RedisLink, scope: string): Promise<WorkerHoldings[]> {
  const all = await link.client().hgetall(key(link, scope))
  const now = link.now()
  const live: WorkerHoldings[] = []
  const gone: string[] = []
  for (const [id, v] of Object.entries(all)) {
    let entry: (WorkerHoldings & { until?: number }) | undefined
    try {
      entry = JSON.parse(v) as WorkerHoldings & { until?: number }
    } catch {
      entry = undefined
    }
    if (entry === undefined || !((entry.until ?? 0) > now)) {
      gone.push(id)
      continue
    }
    const { until: _until, ...report } = entry
    live.push(report)
  }
  if (gone.length)
    await link
      .client()
      .hdel(key(link, scope), ...gone)
      .catch(ignore('the entries expire by themselves'))
  return live.sort((a, b) => (a.worker < b.worker ? -1 : 1))
}

/** One model across the workers that hold it: who, its size there, and its latest use. */
export interface ModelHolders {
  workers: string[]
  bytes?: number
  lastUsedAt?: number
}

/**
 * The API server's view of what its remote workers hold, refreshed every second from their
 * reports; read synchronously by the repository index. Redis down: the last view stays.
 */
export class RemoteHoldings {
  private byModel = new Map<string, ModelHolders>()
  private reports: WorkerHoldings[] = []
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly link: RedisLink,
    private readonly scope: string,
  ) {}

  async start(): Promise<void> {
    await this.refresh()
    this.timer = setInterval(() => void this.refresh(), 1_000)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  /** Reads the reports now (also what the timer does). */
  async refresh(): Promise<void> {
    try {
      this.reports = await readHoldings(this.link, this.scope)
    } catch {
      return
    }
    this.byModel = holdersByModel(this.reports)
  }

  holders(model: string): ModelHolders | undefined {
    return this.byModel.get(model)
  }

  workers(): readonly WorkerHoldings[] {
    return this.reports
  }
}

/** The workers' reports turned around: for each model, the workers that hold it loaded. */
export function holdersByModel(reports: readonly WorkerHoldings[]): Map<string, ModelHolders> {
  const out = new Map<string, ModelHolders>()
  for (const r of reports)
    for (const m of r.models) {
      if (m.state !== 'loaded') continue
      const h = out.get(m.name) ?? { workers: [] }
      h.workers.push(r.worker)
      if (m.bytes !== undefined) h.bytes = Math.max(h.bytes ?? 0, m.bytes)
      if (m.lastUsedAt !== undefined) h.lastUsedAt = Math.max(h.lastUsedAt ?? 0, m.lastUsedAt)
      out.set(m.name, h)
    }
  return out
}
