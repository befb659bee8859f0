import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'

/**
 * The file an error is in. tsx names a `.mts`/`.cts` file by its `.ts` twin when it hands it to
 * esbuild: the file that exists wins.
 */
function sourceFile(reported: string): string {
  const file = resolve(reported)
  if (existsSync(file)) return file
  const stem = file.replace(/\.[cm]?[jt]sx?$/, '')
  return ['.mts', '.cts', '.ts', '.tsx', '.mjs', '.cjs', '.js', '.jsx'].map((x) => stem + x).find(existsSync) ?? file
}

/** One compiler message with its place: line from 1, column from 0 in UTF-8 bytes (as esbuild gives them). */
interface Located {
  file: string
  line: number
  column: number
  text: string
  lineText?: string
}

// How many errors are shown (esbuild stops at ten anyway).
const SHOWN = 5
// A source line longer than this (minified code) is shown as a window around the column.
const WIDE = 160

/**
 * The errors of a TypeScript/JavaScript transform (tsx runs esbuild) with their places, or none
 * when `err` is something else. esbuild gives `errors` with locations; across tsx's loader thread
 * only the message survives, one `FILE:LINE:COLUMN: ERROR: TEXT` line per error.
 */
function locatedErrors(err: unknown): Located[] {
  const e = err as { message?: unknown; errors?: unknown }
  if (Array.isArray(e?.errors)) {
    const found = (e.errors as { text?: unknown; location?: Partial<Located> | null }[]).flatMap((x) =>
      x?.location && typeof x.location.file === 'string' && typeof x.text === 'string'
        ? [{ ...x.location, file: sourceFile(x.location.file), text: x.text } as Located]
        : [],
    )
    if (found.length) return found
  }
  if (typeof e?.message !== 'string' || !/^(?:Transform|Build) failed with \d+ errors?:/.test(e.message)) return []
  return [...e.message.matchAll(/^(.+?):(\d+):(\d+): ERROR: (.*)$/gm)].map((m) => ({
    file: sourceFile(m[1]!),
    line: Number(m[2]),
    column: Number(m[3]),
    text: m[4]!,
  }))
}

/**
 * One error as compilers print it: `FILE:LINE:COLUMN: text` (the column in characters, from 1, as
 * editors take it), then the source line and a caret under the column.
 */
function render(e: Located): string[] {
  let source = e.lineText
  if (source === undefined) {
    try {
      source = readFileSync(e.file, 'utf8').split(/\r?\n/)[e.line - 1]
    } catch {
      // no source to show: the place and the text still say it
    }
  }
  if (source === undefined) return [`${e.file}:${e.line}:${e.column + 1}: ${e.text}`]
  let col = Buffer.from(source).subarray(0, e.column).toString('utf8').length
  const head = `${e.file}:${e.line}:${col + 1}: ${e.text}`
  if (source.length > WIDE) {
    const from = Math.max(0, col - WIDE / 2)
    source = `${from > 0 ? '…' : ''}${source.slice(from, from + WIDE)}${from + WIDE < source.length ? '…' : ''}`
    col = col - from + (from > 0 ? 1 : 0)
  }
  const gutter = String(e.line)
  // Tabs stay tabs under the code, so the caret lines up however the terminal draws them.
  const pad = source.slice(0, col).replace(/[^\t]/g, ' ')
  return [head, `  ${gutter} | ${source}`, `  ${' '.repeat(gutter.length)} | ${pad}^`]
}

/**
 * A compile error of a service (or of a module it imports) as tsc and esbuild show one:
 * `FILE:LINE:COLUMN: message`, the source line and a caret; undefined for any other error.
 *
 * @example
 * compileErrorMessage(err, '/app/service.ts')
 * // '/app/service.ts:6:1: Unexpected "}"\n  6 | }\n    | ^'
 */
export function compileErrorMessage(err: unknown, entry: string): string | undefined {
  const errors = locatedErrors(err)
  if (errors.length === 0) return undefined
  const lines = errors.slice(0, SHOWN).flatMap((e, i) => [...(i === 0 ? [] : ['']), ...render(e)])
  const more = errors.length - SHOWN
  if (more > 0) lines.push(`… and ${more} more error${more === 1 ? '' : 's'}`)
  // An error in a module the service imports: say which service was being loaded.
  if (errors.some((e) => e.file !== entry)) lines.push(`(while importing ${entry})`)
  return lines.join('\n')
}
