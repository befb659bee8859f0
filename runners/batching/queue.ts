/**
 * The waiting requests of one runner method: a queue per input shape (only requests with the
 * same key may share a batch), each ordered by priority level, then arrival. Keeps the counts
 * the dispatcher's decisions need (rows waiting, rows waiting at a level or above) without
 * walking the queues.
 */
export interface Waiting {
  key: string
  rows: number
  /** Rows not yet handed to a batch. */
  next: number
  priority: number
  /** Arrival order: ties within a level go first come, first served. */
  seq: number
  arrived: number
  /** When it must have finished running (its budget: deadline less the headroom). */
  deadline: number
}

const before = (a: Waiting, b: Waiting) => a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq)

export class WaitQueue<T extends Waiting> {
  private readonly queues = new Map<string, T[]>()
  private rowsAt = new Map<number, number>()
  /** Rows not yet in a batch. */
  rows = 0
  /** Requests not yet fully in a batch. */
  size = 0

  add(item: T): void {
    let q = this.queues.get(item.key)
    if (q === undefined) this.queues.set(item.key, (q = []))
    // Usually the newest of its level goes last: search from the end.
    let i = q.length
    while (i > 0 && before(item, q[i - 1]!)) i--
    q.splice(i, 0, item)
    this.count(item.priority, item.rows - item.next)
    this.size++
  }

  /** Rows waiting at `priority` or a more urgent level (work that runs before such a request). */
  rowsAtOrAbove(priority: number): number {
    let n = 0
    for (const [p, rows] of this.rowsAt) if (p <= priority) n += rows
    return n
  }

  /** The queue whose head goes first: most urgent level, then oldest. */
  first(): T[] | undefined {
    let best: T[] | undefined
    for (const q of this.queues.values()) if (q.length > 0 && (best === undefined || before(q[0]!, best[0]!))) best = q
    return best
  }

  queueOf(key: string): T[] | undefined {
    return this.queues.get(key)
  }

  /** Rows of `q` not yet in a batch. */
  rowsIn(q: readonly T[]): number {
    return q.reduce((n, it) => n + it.rows - it.next, 0)
  }

  /** `rows` of `item` went into a batch (item still queued while some remain). */
  took(q: T[], item: T, rows: number): void {
    item.next += rows
    this.count(item.priority, -rows)
    if (item.next === item.rows) {
      q.splice(q.indexOf(item), 1)
      this.size--
    }
  }

  /** Takes `item` out with its remaining rows (shed, failed, or its caller went away). */
  remove(item: T): boolean {
    const q = this.queues.get(item.key)
    const at = q?.indexOf(item) ?? -1
    if (at < 0) return false
    q!.splice(at, 1)
    this.count(item.priority, -(item.rows - item.next))
    this.size--
    return true
  }

  /** Every queued item, in no particular order; the queue is left empty. */
  clear(): T[] {
    const all = [...this.queues.values()].flat()
    this.queues.clear()
    this.rowsAt.clear()
    this.rows = 0
    this.size = 0
    return all
  }

  private count(priority: number, rows: number): void {
    this.rows += rows
    const n = (this.rowsAt.get(priority) ?? 0) + rows
    if (n === 0) this.rowsAt.delete(priority)
    else this.rowsAt.set(priority, n)
  }
}
