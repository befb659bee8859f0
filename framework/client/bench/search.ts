/**
 * The runner settings bundle tune searches. Names are the serve config file's
 * (`runners.NAME.workers`, `batching.maxBatchSize`, …).
 */
export interface Candidate {
  workers: number
  /** 0: the runner's own default (not written to the config). */
  intraOpThreads: number
  maxBatchSize: number
  maxDelayMs: number
  isolation: 'process' | 'thread'
  /** Batches a worker holds at once (one running, the rest waiting in it). */
  batchesPerWorker: number
}

/** How a candidate measured: the best load step that met the constraints, or the best it did. */
export interface Score {
  feasible: boolean
  goodput: number
  p99: number
  /** The concurrency of that step. */
  concurrency: number
}

export interface Trial {
  candidate: Candidate
  score: Score
}

export interface SearchOptions {
  /** Measures a candidate; undefined when the budget ran out during it (it is not counted). */
  evaluate: (c: Candidate) => Promise<Score | undefined>
  /** Where the search starts: the runner's settings now (its defaults, or what code and config say). */
  start: Candidate
  /** CPU cores: workers × intra-op threads beyond them only contend. */
  cores: number
  /** The model's largest batch (its max_batch_size), when it has one. */
  maxBatchCap?: number
  /** Rows one request carries: a smaller maxBatchSize would refuse every request. */
  minBatch?: number
  /** True once no further candidate should start. */
  outOfTime: () => boolean
  onTrial?: (t: Trial, best: Trial) => void
}

/** Whether `a` is better than `b`: meeting the constraints first, then goodput (2% is noise), then p99. */
export function better(a: Score, b: Score): boolean {
  if (a.feasible !== b.feasible) return a.feasible
  if (a.goodput > b.goodput * 1.02) return true
  if (a.goodput < b.goodput / 1.02) return false
  return a.p99 < b.p99
}

const key = (c: Candidate) =>
  JSON.stringify([c.workers, c.intraOpThreads, c.maxBatchSize, c.maxDelayMs, c.isolation, c.batchesPerWorker])

/** The values each setting may take, in order (a walk goes up or down this list). */
export function dimensions(o: Pick<SearchOptions, 'cores' | 'maxBatchCap' | 'minBatch' | 'start'>) {
  const cap = o.maxBatchCap && o.maxBatchCap > 0 ? o.maxBatchCap : 128
  const floor = o.minBatch ?? 1
  const uniq = (xs: number[]) => [...new Set(xs)].sort((a, b) => a - b)
  return {
    maxBatchSize: uniq([1, 2, 4, 8, 16, 32, 64, 128, o.start.maxBatchSize].filter((v) => v <= cap && v >= floor)),
    workers: uniq([...Array.from({ length: Math.max(1, o.cores) }, (_, i) => i + 1), o.start.workers]),
    intraOpThreads: uniq([0, 1, 2, 4, 8, 16, o.start.intraOpThreads].filter((v) => v <= Math.max(1, o.cores))),
    maxDelayMs: uniq([0, 1, 2, 5, 10, 20, o.start.maxDelayMs]),
    isolation: ['process', 'thread'] as const,
    batchesPerWorker: uniq([1, 2, 3, o.start.batchesPerWorker]),
  }
}

/**
 * A coordinate search that prunes, as model_analyzer's quick search does: from the starting
 * settings, walk one setting at a time up and down its values, keeping each step that measures
 * better and stopping a walk at the first that does not (throughput against batch size, workers
 * or threads rises to a peak and then falls or flattens). Passes repeat until one changes
 * nothing. Each candidate is measured once; the search stops when time runs out. Returns every
 * trial in the order run.
 */
export async function search(o: SearchOptions): Promise<Trial[]> {
  const trials: Trial[] = []
  const seen = new Map<string, Trial>()
  const run = async (c: Candidate): Promise<Trial | undefined> => {
    const k = key(c)
    if (seen.has(k)) return seen.get(k)
    if (o.outOfTime()) return undefined
    const score = await o.evaluate(c)
    if (score === undefined) return undefined
    const t = { candidate: c, score }
    seen.set(k, t)
    trials.push(t)
    return t
  }
  const first = await run(o.start)
  if (first === undefined) return trials
  let best = first
  o.onTrial?.(first, best)
  const dims = dimensions(o)
  const names = Object.keys(dims) as (keyof typeof dims)[]
  for (let pass = 0; pass < 3; pass++) {
    let changed = false
    for (const name of names) {
      const values = dims[name] as readonly (number | string)[]
      const at = values.indexOf(best.candidate[name])
      for (const dir of [1, -1]) {
        for (let i = at + dir; i >= 0 && i < values.length; i += dir) {
          const t = await run({ ...best.candidate, [name]: values[i] })
          if (t === undefined) return trials
          const improved = better(t.score, best.score)
          if (improved) {
            best = t
            changed = true
          }
          o.onTrial?.(t, best)
          if (!improved) break
        }
        // Walking up improved things: the way down from the new best was measured on the way.
        if (best.candidate[name] !== values[at]) break
      }
      if (o.outOfTime()) return trials
    }
    if (!changed) break
  }
  return trials
}

/**
 * The trials ranked best first: meeting the constraints, then goodput, then p99 — a total order
 * (better()'s 2% tie steers the walk; a ranking needs one that does not depend on trial order).
 */
export const ranked = (trials: readonly Trial[]): Trial[] =>
  [...trials].sort(
    (a, b) =>
      Number(b.score.feasible) - Number(a.score.feasible) ||
      b.score.goodput - a.score.goodput ||
      a.score.p99 - b.score.p99,
  )
