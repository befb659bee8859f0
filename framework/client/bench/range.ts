import { BundleError } from '../../../errors/index.js'

/**
 * The steps of a sweep, perf_analyzer's range syntax with a geometric form: `8` (one step),
 * `1:64` (1, 2, 3 … 64), `50:400:50` (add 50), `1:64:x2` (double: 1, 2, 4 … 64). The end is
 * always measured, even when the step does not land on it.
 */
export function parseRange(flag: string, text: string, o: { integer?: boolean } = {}): number[] {
  const min = 1
  const usage = (why: string) =>
    new BundleError(
      'E_CLI_USAGE',
      `${flag} "${text}": ${why} (write N, START:END, START:END:STEP or START:END:xFACTOR)`,
    )
  const parts = text.split(':')
  if (parts.length > 3) throw usage('too many parts')
  const num = (s: string | undefined, what: string): number => {
    const n = Number(s)
    if (s === undefined || s.trim() === '' || !Number.isFinite(n) || n < min)
      throw usage(`${what} must be a number ≥ ${min}`)
    return n
  }
  const start = num(parts[0], 'the start')
  if (parts.length === 1) return [start]
  const end = num(parts[1], 'the end')
  if (end < start) throw usage('the end is below the start')
  const step = parts[2] ?? '1'
  const geometric = step.startsWith('x')
  const by = num(geometric ? step.slice(1) : step, 'the step')
  if (geometric && by <= 1) throw usage('a factor must be more than 1')
  const out: number[] = []
  for (let v = start; v < end && out.length < 1000; v = geometric ? v * by : v + by) out.push(round(v))
  if (out.length >= 1000) throw usage('more than 1000 steps')
  out.push(end)
  // Clients come whole: 1:10:x1.5 is 1, 2, 3, 5, 8, 10.
  return [...new Set(o.integer ? out.map((v) => Math.round(v)) : out)]
}

const round = (v: number) => Math.round(v * 1000) / 1000
