import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'

const FILE = new URL('./RESULTS.md', import.meta.url)

export function machine(): string {
  return (
    `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ` +
    `${process.version}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`
  )
}

/** Replaces one bench's section of bench/RESULTS.md, keeping the others. */
export function writeSection(name: string, markdown: string): void {
  const start = `<!-- ${name}:start -->`
  const end = `<!-- ${name}:end -->`
  const block = `${start}\n${markdown.trim()}\n${end}`
  let doc = existsSync(FILE)
    ? readFileSync(FILE, 'utf8')
    : '# Benchmark results\n\nWritten by `npm run bench`; each section by its own bench. Numbers are from one run ' +
      'on a shared, noisy machine: compare ratios within a section, not across runs.\n'
  const re = new RegExp(`${start}[\\s\\S]*?${end}`)
  doc = re.test(doc) ? doc.replace(re, block) : `${doc.trimEnd()}\n\n${block}\n`
  writeFileSync(FILE, doc)
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export const fmt = (n: number, digits = 1): string => n.toFixed(digits)
