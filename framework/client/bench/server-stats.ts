import { inferenceClient } from './grpc-client.js'

// The server's side of a step, from its own statistics (/v2 model statistics, HTTP or gRPC):
// how long requests waited in the batcher's queue, how long batches computed, how many rows a
// batch held. A step's figures are the difference of two snapshots.

interface Counts {
  inferences: number
  executions: number
  queue: { count: number; ns: number }
  compute: { count: number; ns: number }
}

export type Snapshot = Map<string, Counts>

export interface ServerSplit {
  model: string
  /** Rows inferred in the step. */
  inferences: number
  /** Mean rows per batch. */
  batch: number
  /** Mean wait in the queue per request, ms. */
  queueMs: number
  /** Mean compute per batch, ms. */
  computeMs: number
}

const n = (v: unknown) => Number(v ?? 0)

function read(stats: any[]): Snapshot {
  const out: Snapshot = new Map()
  for (const s of stats) {
    const i = s.inference_stats ?? {}
    out.set(`${s.name}:${s.version}`, {
      inferences: n(s.inference_count),
      executions: n(s.execution_count),
      queue: { count: n(i.queue?.count), ns: n(i.queue?.ns) },
      compute: { count: n(i.compute_infer?.count), ns: n(i.compute_infer?.ns) },
    })
  }
  return out
}

/** Every model's statistics now, or undefined when the server does not give them (not fatal). */
export async function snapshot(o: { http?: URL; grpc?: string; key?: string }): Promise<Snapshot | undefined> {
  try {
    if (o.grpc) {
      const client = inferenceClient(o.grpc, o.key)
      try {
        const res = await client.call<any>('ModelStatistics', {}, 5_000)
        return read(res.model_stats)
      } finally {
        client.close()
      }
    }
    const res = await fetch(new URL('/v2/models/stats', o.http), {
      headers: o.key ? { authorization: `Bearer ${o.key}` } : {},
      signal: AbortSignal.timeout(5_000),
    })
    if (!res.ok) return undefined
    return read(((await res.json()) as { model_stats: unknown[] }).model_stats)
  } catch {
    return undefined
  }
}

/** What each model did between two snapshots (models that did nothing are left out). */
export function split(before: Snapshot | undefined, after: Snapshot | undefined): ServerSplit[] {
  if (!before || !after) return []
  const rows: ServerSplit[] = []
  for (const [model, a] of after) {
    const b = before.get(model) ?? {
      inferences: 0,
      executions: 0,
      queue: { count: 0, ns: 0 },
      compute: { count: 0, ns: 0 },
    }
    const inferences = a.inferences - b.inferences
    const executions = a.executions - b.executions
    if (inferences <= 0) continue
    const q = a.queue.count - b.queue.count
    const c = a.compute.count - b.compute.count
    rows.push({
      model,
      inferences,
      batch: executions > 0 ? inferences / executions : 0,
      queueMs: q > 0 ? (a.queue.ns - b.queue.ns) / q / 1e6 : 0,
      computeMs: c > 0 ? (a.compute.ns - b.compute.ns) / c / 1e6 : 0,
    })
  }
  return rows.sort((x, y) => (x.model < y.model ? -1 : 1))
}
