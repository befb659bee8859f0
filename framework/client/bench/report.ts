import type { StepResult } from './drive.js'
import type { ServerSplit } from './server-stats.js'

/** One measured step: the client's figures and the server's split. */
export interface BenchRow extends StepResult {
  server: ServerSplit[]
}

const f = (v: number, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : '-')

/** The columns of the table and of CSV, in order. */
function columns(rows: readonly BenchRow[]): [string, (r: BenchRow) => string][] {
  const loadName = rows[0]?.load.mode === 'rate' ? 'rate/s' : 'concurrency'
  // The server's split of the model that inferred most (the one the API is about).
  const main = (r: BenchRow) => [...r.server].sort((a, b) => b.inferences - a.inferences)[0]
  return [
    [loadName, (r) => String(r.load.value)],
    ['goodput/s', (r) => f(r.stats.goodput)],
    ['refused/s', (r) => f(r.stats.seconds > 0 ? r.stats.refused / r.stats.seconds : 0)],
    ['errors', (r) => String(r.stats.errors)],
    ['p50 ms', (r) => f(r.stats.p50, 2)],
    ['p90 ms', (r) => f(r.stats.p90, 2)],
    ['p95 ms', (r) => f(r.stats.p95, 2)],
    ['p99 ms', (r) => f(r.stats.p99, 2)],
    ['batch', (r) => (main(r) ? f(main(r)!.batch, 2) : '-')],
    ['queue ms', (r) => (main(r) ? f(main(r)!.queueMs, 2) : '-')],
    ['compute ms', (r) => (main(r) ? f(main(r)!.computeMs, 2) : '-')],
    ['stable', (r) => (r.stable ? 'yes' : `no (${r.windows} windows)`)],
  ]
}

/** An aligned text table, with the codes of refusals and errors under it. */
export function table(rows: readonly BenchRow[]): string {
  const cols = columns(rows)
  const cells = [cols.map(([h]) => h), ...rows.map((r) => cols.map(([, get]) => get(r)))]
  const widths = cols.map((_, i) => Math.max(...cells.map((c) => c[i]!.length)))
  const line = (c: string[]) => c.map((v, i) => v.padStart(widths[i]!)).join('  ')
  const out = [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)]
  for (const r of rows) {
    const failed = Object.entries(r.stats.codes).filter(([code]) => !/^(2\d\d|OK)$/.test(code))
    if (failed.length) out.push(`  ${r.load.value}: ${failed.map(([code, count]) => `${code} ×${count}`).join(', ')}`)
  }
  return `${out.join('\n')}\n`
}

export function csv(rows: readonly BenchRow[]): string {
  const cols = columns(rows)
  const esc = (v: string) => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v)
  return `${[cols.map(([h]) => h), ...rows.map((r) => cols.map(([, get]) => get(r)))]
    .map((c) => c.map(esc).join(','))
    .join('\n')}\n`
}

export function json(rows: readonly BenchRow[]): string {
  return `${JSON.stringify(rows, null, 2)}\n`
}
