/** Recent batch overheads (round trip less compute): the best of them is what the path costs unloaded. */
export class Overhead {
  private readonly ring: number[] = []
  private at = 0
  observe(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return
    if (this.ring.length < 32) this.ring.push(ms)
    else this.ring[this.at++ % 32] = ms
  }
  best(): number {
    return this.ring.length ? Math.min(...this.ring) : 0
  }
  /** The median: how long an answer usually takes to come back (a busy event loop shows here). */
  typical(): number {
    if (this.ring.length === 0) return 0
    const s = [...this.ring].sort((a, b) => a - b)
    return s[s.length >> 1]!
  }
}
