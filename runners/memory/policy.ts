// Which loaded models make room for another: pure, so the server and a simulation of the same
// trace (bench:models) decide alike. Two policies:
//  - lru: the least recently used first, until the room is enough (least-recently-used by bytes).
//  - tinylfu: frequency-aware (W-TinyLFU's idea, for a cache that must admit every miss): among
//    the least recently used few, the one used least often goes first, as a count-min sketch with
//    periodic halving estimates it; so a one-off request for a cold model does not push out a model
//    that is asked for all the time.

export type PolicyName = 'lru' | 'tinylfu'

/** A loaded model that may be evicted now (nothing queued or running, not pinned). */
export interface Candidate {
  name: string
  bytes: number
  /** When it was last used (any monotonic counter). */
  lastUse: number
}

export interface EvictionPolicy {
  readonly name: PolicyName
  /** A request for `name` (hit or miss). */
  record(name: string): void
  /**
   * The candidates to evict, in order, to free at least `need` bytes; undefined when even all of
   * them would not free enough.
   */
  victims(candidates: readonly Candidate[], need: number): string[] | undefined
}

const byAge = (cs: readonly Candidate[]) => [...cs].sort((a, b) => a.lastUse - b.lastUse)

export class LruPolicy implements EvictionPolicy {
  readonly name = 'lru' as const
  record(): void {}
  victims(candidates: readonly Candidate[], need: number): string[] | undefined {
    const out: string[] = []
    let freed = 0
    for (const c of byAge(candidates)) {
      if (freed >= need) break
      out.push(c.name)
      freed += c.bytes
    }
    return freed >= need ? out : undefined
  }
}

/** A count-min sketch of 4-bit-like counters (capped at 15) that halves every `sample` records. */
class FrequencySketch {
  private readonly rows: Uint8Array[]
  private readonly width: number
  private records = 0

  constructor(
    width: number,
    private readonly sample: number,
  ) {
    this.width = Math.max(16, width)
    this.rows = Array.from({ length: 4 }, () => new Uint8Array(this.width))
  }

  private index(name: string, row: number): number {
    let h = 2166136261 ^ (row * 0x9e3779b1)
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619)
    return (h >>> 0) % this.width
  }

  add(name: string): void {
    for (let r = 0; r < 4; r++) {
      const i = this.index(name, r)
      if (this.rows[r]![i]! < 15) this.rows[r]![i]!++
    }
    if (++this.records >= this.sample) {
      this.records = 0
      for (const row of this.rows) for (let i = 0; i < row.length; i++) row[i]! >>= 1
    }
  }

  estimate(name: string): number {
    let min = 15
    for (let r = 0; r < 4; r++) min = Math.min(min, this.rows[r]![this.index(name, r)]!)
    return min
  }
}

export class TinyLfuPolicy implements EvictionPolicy {
  readonly name = 'tinylfu' as const
  private readonly sketch: FrequencySketch

  /** `models`: how many models may be asked for (sizes the sketch); `window`: the LRU tail it picks from. */
  constructor(
    models: number,
    private readonly window = 4,
  ) {
    this.sketch = new FrequencySketch(models * 4, Math.max(100, models * 10))
  }

  record(name: string): void {
    this.sketch.add(name)
  }

  victims(candidates: readonly Candidate[], need: number): string[] | undefined {
    const left = byAge(candidates)
    const out: string[] = []
    let freed = 0
    while (freed < need && left.length > 0) {
      // The least often used of the oldest few (ties: the oldest).
      const tail = left.slice(0, this.window)
      const pick = tail.reduce((a, b) => (this.sketch.estimate(b.name) < this.sketch.estimate(a.name) ? b : a))
      left.splice(left.indexOf(pick), 1)
      out.push(pick.name)
      freed += pick.bytes
    }
    return freed >= need ? out : undefined
  }
}

export function makePolicy(name: PolicyName, models: number): EvictionPolicy {
  return name === 'tinylfu' ? new TinyLfuPolicy(models) : new LruPolicy()
}

/**
 * One request after another, with no concurrency: what `policy` would load for this trace with
 * these sizes and this capacity. The hit rate is 1 − loads / requests.
 */
export function simulate(
  trace: readonly string[],
  bytes: ReadonlyMap<string, number>,
  capacity: number,
  policy: EvictionPolicy,
): { loads: number; evictions: number; hitRate: number } {
  const loaded = new Map<string, Candidate>()
  let used = 0
  let loads = 0
  let evictions = 0
  trace.forEach((name, t) => {
    policy.record(name)
    const hit = loaded.get(name)
    if (hit) {
      hit.lastUse = t
      return
    }
    const size = bytes.get(name) ?? 0
    if (size > capacity) return
    const need = used + size - capacity
    if (need > 0) {
      for (const v of policy.victims([...loaded.values()], need) ?? []) {
        used -= loaded.get(v)!.bytes
        loaded.delete(v)
        evictions++
      }
    }
    loaded.set(name, { name, bytes: size, lastUse: t })
    used += size
    loads++
  })
  return { loads, evictions, hitRate: trace.length ? 1 - loads / trace.length : 1 }
}
