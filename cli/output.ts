import type { ModelSummary } from '../store/index.js'

export type Format = 'table' | 'json' | 'yaml'

export function humanSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let n = bytes
  let u = 0
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024
    u++
  }
  return u === 0 ? `${n} B` : `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[u]}`
}

/** `2026-12-02 11:20:03` in UTC: sortable, and the same on every machine. */
export const shortDate = (iso: string): string => iso.slice(0, 19).replace('T', ' ')

export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`
}

export async function structured(value: unknown, format: 'json' | 'yaml'): Promise<string> {
  if (format === 'json') return `${JSON.stringify(value, null, 2)}\n`
  const { stringify } = await import('yaml')
  // No anchors and aliases (&a1 / *a1) where two fields hold the same object: readers expect
  // every value written out, and not every YAML tool resolves aliases.
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false })
}

export function modelsTable(models: readonly ModelSummary[]): string {
  return table(
    ['Tag', 'Framework', 'Size', 'Created'],
    models.map((m) => [m.tag, m.framework, humanSize(m.size), shortDate(m.created)]),
  )
}

/**
 * One wording for what an import did, for models and bundles alike: `imported ocr-cls:1.0.0`,
 * `already present: ocr-cls:1.0.0 (sha256:…)`. `status` is the store's (imported,
 * already-present, replaced).
 */
export function importLine(status: string, what: string, digest?: string): string {
  if (status === 'already-present') return `already present: ${what}${digest ? ` (${digest})` : ''}\n`
  return `${status} ${what}\n`
}

export function write(text: string): void {
  process.stdout.write(text)
}
