// Near misses for error messages. The same rule as the CLI's flag and command hints (commander's
// suggestSimilar): edit distance with transpositions, at most 2 edits, and under 60% of the word
// changed, so `modles` suggests `models` but `x` suggests nothing.

const MAX_EDITS = 2
const MIN_SIMILARITY = 0.4

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > MAX_EDITS) return Math.max(a.length, b.length)
  let before: number[] = []
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, before[j - 2]! + 1)
    }
    before = prev
    prev = row
  }
  return prev[b.length]!
}

/**
 * The candidates nearest to `word` (ties sorted), or none when nothing is near.
 *
 * @example
 * similar('modles', ['service', 'models', 'name']) // ['models']
 */
export function similar(word: string, candidates: Iterable<string>): string[] {
  let best = MAX_EDITS
  let found: string[] = []
  for (const candidate of new Set(candidates)) {
    if (candidate.length <= 1 || candidate === word) continue
    const distance = editDistance(word, candidate)
    const length = Math.max(word.length, candidate.length)
    if (distance > best || (length - distance) / length <= MIN_SIMILARITY) continue
    if (distance < best) {
      best = distance
      found = []
    }
    found.push(candidate)
  }
  return found.sort((a, b) => a.localeCompare(b))
}

/**
 * ` (did you mean "x"?)`, ` (did you mean one of "x", "y"?)`, or '' when nothing is near.
 *
 * @example
 * `unknown key "modles"${didYouMean('modles', ['models'])}` // unknown key "modles" (did you mean "models"?)
 */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const found = similar(word, candidates).map((c) => JSON.stringify(c))
  if (found.length === 0) return ''
  return found.length === 1 ? ` (did you mean ${found[0]}?)` : ` (did you mean one of ${found.join(', ')}?)`
}
