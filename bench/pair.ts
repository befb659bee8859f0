import { median } from './results.js'
import type { WrkResult } from './wrk.js'

/**
 * Two servers under the same load: a short warm-up of each, then `rounds` rounds of A and B,
 * alternating which goes first so a slow drift of the machine hits both alike. Each side's median
 * round (by goodput), the median of the per-round goodput ratios A / B, and every round (`onRound`
 * hears each ratio as it comes).
 */
export async function interleaved(
  run: (url: string, seconds?: number) => Promise<WrkResult>,
  a: string,
  b: string,
  rounds: number,
  onRound?: (round: number, ratio: number) => void,
): Promise<{ a: WrkResult; b: WrkResult; ratio: number; as: WrkResult[]; bs: WrkResult[]; ratios: number[] }> {
  await run(a, 2)
  await run(b, 2)
  const as: WrkResult[] = []
  const bs: WrkResult[] = []
  const ratios: number[] = []
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      as.push(await run(a))
      bs.push(await run(b))
    } else {
      bs.push(await run(b))
      as.push(await run(a))
    }
    ratios.push(as[i]!.goodput / Math.max(bs[i]!.goodput, 1e-9))
    onRound?.(i + 1, ratios[i]!)
  }
  const mid = (xs: WrkResult[]) => [...xs].sort((x, y) => x.goodput - y.goodput)[Math.floor(xs.length / 2)]!
  return { a: mid(as), b: mid(bs), ratio: median(ratios), as, bs, ratios }
}
