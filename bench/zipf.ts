// Seeded draws for traces that can be replayed: a small PRNG and a Zipf distribution over ranks.

/** mulberry32: a 32-bit seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** `n` draws of ranks 0…k-1 with P(rank r) ∝ 1 / (r + 1)^s. */
export function zipfTrace(k: number, s: number, n: number, random: () => number): number[] {
  const weights = Array.from({ length: k }, (_, r) => 1 / (r + 1) ** s)
  const total = weights.reduce((a, b) => a + b, 0)
  const cdf: number[] = []
  let acc = 0
  for (const w of weights) cdf.push((acc += w / total))
  return Array.from({ length: n }, () => {
    const u = random()
    let lo = 0
    let hi = k - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid]! < u) lo = mid + 1
      else hi = mid
    }
    return lo
  })
}

/** A seeded shuffle (Fisher–Yates). */
export function shuffled<T>(xs: readonly T[], random: () => number): T[] {
  const out = [...xs]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}
