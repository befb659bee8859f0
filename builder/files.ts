import { readdirSync, statSync } from 'node:fs'
import { join, relative, sep } from 'node:path'

/**
 * Glob patterns as bundle.yaml's include/exclude use them, matched against POSIX paths relative
 * to the bundle directory: `*` and `?` stay within one path segment, `**` crosses segments,
 * `{a,b}` is either; a pattern without wildcards also names everything under it (`assets`).
 */
export function globToRegExp(glob: string): RegExp {
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const slash = glob[i + 2] === '/'
        re += slash ? '(?:.*/)?' : '.*'
        i += slash ? 2 : 1
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '{') {
      const end = glob.indexOf('}', i)
      if (end < 0) re += '\\{'
      else {
        re += `(?:${glob.slice(i + 1, end).split(',').map((alt) => globToRegExp(alt).source.slice(1, -1)).join('|')})`
        i = end
      }
    } else re += /[\\^$.|+()[\]]/.test(c) ? `\\${c}` : c
  }
  const plain = !/[*?{]/.test(glob)
  return new RegExp(`^${re.replace(/\/$/, '')}${plain || glob.endsWith('/') ? '(?:/.*)?' : ''}$`)
}

/** Never part of a bundle, whatever include says. */
const ALWAYS_EXCLUDED = ['node_modules', '.git', '**/.DS_Store']

/** Sources are compiled into the bundle's code; they are copied only when include names them. */
const SOURCE = /\.(?:[cm]?ts|tsx|[cm]?js|jsx)$/

/**
 * The files of `dir` a bundle carries besides its compiled code: everything but sources and
 * excluded paths by default; only what `include` matches when it is given. Sorted, so a
 * build lists them the same way every time.
 */
export function collectFiles(dir: string, include: readonly string[] | undefined, exclude: readonly string[] = []): string[] {
  const inc = include?.map(globToRegExp)
  const exc = [...ALWAYS_EXCLUDED, ...exclude].map(globToRegExp)
  const out: string[] = []
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const full = join(d, name)
      const rel = relative(dir, full).split(sep).join('/')
      if (exc.some((r) => r.test(rel))) continue
      const st = statSync(full)
      if (st.isDirectory()) walk(full)
      else if (st.isFile() && (inc ? inc.some((r) => r.test(rel)) : !SOURCE.test(rel))) out.push(rel)
    }
  }
  walk(dir)
  return out
}
