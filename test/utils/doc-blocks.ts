import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

/**
 * The code blocks of the README and docs/ that claim to run: shell (sh, bash) and TypeScript (ts).
 * A block says how it is taken by an HTML comment on the line before its fence (invisible on the
 * rendered page):
 *   (none)                   shell: run, in order with the page's other blocks; ts: compiled, and
 *                            a script (no export, no decorated class) run too, in its place
 *   <!-- server -->          shell: started in the background; the page's later blocks run once
 *                            its /readyz answers 200, and it is stopped at the page's end
 *   <!-- background -->      shell: started in the background (a `bundle worker`), nothing waited
 *                            for; it runs until the page's end
 *   <!-- fragment -->        ts: part of a file shown whole elsewhere; not compiled alone
 *   <!-- not run: WHY -->    cannot run here (a GPU, a cluster, minutes of load); WHY is required
 */
export interface DocBlock {
  /** Relative to the repository, e.g. docs/models.md. */
  file: string
  /** 1-based line of the opening fence. */
  line: number
  lang: 'sh' | 'ts'
  mark:
    | { kind: 'run' }
    | { kind: 'server' }
    | { kind: 'background' }
    | { kind: 'fragment' }
    | { kind: 'not run'; why: string }
  text: string
}

const LANGS: Record<string, DocBlock['lang']> = { sh: 'sh', bash: 'sh', shell: 'sh', ts: 'ts', typescript: 'ts' }

function markOf(previous: string | undefined, where: string): DocBlock['mark'] {
  const m = /^<!--\s*(.*?)\s*-->$/.exec(previous?.trim() ?? '')
  if (!m) return { kind: 'run' }
  const said = m[1]!
  if (said === 'server') return { kind: 'server' }
  if (said === 'background') return { kind: 'background' }
  if (said === 'fragment') return { kind: 'fragment' }
  const notRun = /^not run:\s*(\S.*)$/.exec(said)
  if (notRun) return { kind: 'not run', why: notRun[1]! }
  throw new Error(`${where}: unknown block mark <!-- ${said} --> (server, background, fragment, not run: WHY)`)
}

/** Every shell and TypeScript block of one markdown file. */
export function blocksOf(repo: string, path: string): DocBlock[] {
  const lines = readFileSync(path, 'utf8').split('\n')
  const blocks: DocBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(\S*)/.exec(lines[i]!)
    if (!open) continue
    let end = i + 1
    while (end < lines.length && !/^\s*```/.test(lines[end]!)) end++
    const lang = LANGS[open[1]!]
    const indent = lines[i]!.length - lines[i]!.trimStart().length
    const file = relative(repo, path)
    if (lang) {
      let p = i - 1
      while (p >= 0 && lines[p]!.trim() === '') p--
      blocks.push({
        file,
        line: i + 1,
        lang,
        mark: markOf(lines[p], `${file}:${i + 1}`),
        // A block indented under a list item: its lines without the indent.
        text: lines
          .slice(i + 1, end)
          .map((l) => l.slice(indent))
          .join('\n'),
      })
    }
    i = end
  }
  return blocks
}

/** The pages: README.md and every docs/*.md. */
export function docPages(repo: string): string[] {
  const docs = readdirSync(join(repo, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => join(repo, 'docs', f))
  return [join(repo, 'README.md'), ...docs]
}

/**
 * A page's shell text as the test runs it: the documented ports replaced by free ones (3000 for
 * HTTP, 8001 for gRPC), so runs never collide with anything else on the machine.
 */
export function withPorts(text: string, http: number, grpc: number): string {
  return text
    .replace(/(localhost|127\.0\.0\.1|\$HOST):3000\b/g, `$1:${http}`)
    .replace(/--port 3000\b/g, `--port ${http}`)
    .replace(/(localhost|127\.0\.0\.1):8001\b/g, `$1:${grpc}`)
    .replace(/--grpc-port 8001\b/g, `--grpc-port ${grpc}`)
}

/** A TypeScript block that is a script (it declares no export and no decorated class): it runs, as well as compiles. */
export const isScript = (b: DocBlock): boolean =>
  b.lang === 'ts' && b.mark.kind === 'run' && !/^export\b/m.test(b.text) && !/^\s*@\w/m.test(b.text)
