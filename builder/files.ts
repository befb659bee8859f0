import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { isAbsolute, join, relative, sep } from 'node:path'
import ignore from 'ignore'
import { BundleError } from '../errors/index.js'

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
        re += `(?:${glob
          .slice(i + 1, end)
          .split(',')
          .map((alt) => globToRegExp(alt).source.slice(1, -1))
          .join('|')})`
        i = end
      }
    } else re += /[\\^$.|+()[\]]/.test(c) ? `\\${c}` : c
  }
  const plain = !/[*?{]/.test(glob)
  return new RegExp(`^${re.replace(/\/$/, '')}${plain || glob.endsWith('/') ? '(?:/.*)?' : ''}$`)
}

/**
 * Names that hold credentials or repository settings far more often than anything a service
 * needs at run time: left out at any depth (a directory with such a name, with everything in
 * it). `include:` brings one back only by its exact path, so shipping it is always deliberate.
 */
const SECRET = /^(?:\.env|\.env\..*|\.npmrc|\.git.*|.*\.pem|.*\.key|id_.*|\.ssh|\.aws)$/

/** Never part of a bundle, at any depth, whatever include says: installed packages and git's own directory. */
const NEVER = new Set(['node_modules', '.git', '.DS_Store'])

/** Where `.bundleignore` rules live: next to bundle.yaml, in gitignore syntax. */
export const IGNORE_FILE = '.bundleignore'

/** Sources are compiled into the bundle's code; they are copied only when include names them. */
const SOURCE = /\.(?:[cm]?ts|tsx|[cm]?js|jsx)$/

export const looksSecret = (name: string): boolean => SECRET.test(name)

export interface CollectOptions {
  /**
   * bundle.yaml `include:`: globs; a path without wildcards also brings back a file left out as
   * secret or by .bundleignore.
   */
  include?: readonly string[] | undefined
  /** bundle.yaml `exclude:` globs. */
  exclude?: readonly string[] | undefined
  /** Paths relative to `dir` that never go in (bundle.yaml, the model store when it lies inside). */
  never?: readonly string[]
}

export interface Collected {
  /** What the bundle carries besides its compiled code: relative POSIX paths, sorted. */
  files: string[]
  /** Files left out because their name looks like a secret (not named exactly by include). */
  secrets: string[]
  /** Symbolic links left out because they point outside the directory. */
  outside: string[]
}

/**
 * The files of `dir` a bundle carries besides its compiled code: everything but sources and
 * excluded paths by default; only what `include` matches when it is given. Secret-looking
 * names and `.bundleignore` matches stay out unless include names their exact path; node_modules,
 * `.git` and `never` stay out always. Sorted, so a build lists them the same way every time.
 */
export function collectFiles(dir: string, o: CollectOptions = {}): Collected {
  const inc = o.include?.map(globToRegExp)
  const exc = (o.exclude ?? []).map(globToRegExp)
  const exact = new Set(
    (o.include ?? []).filter((p) => !/[*?{[\]!]/.test(p)).map((p) => p.replace(/^\.\//, '').replace(/\/+$/, '')),
  )
  const never = new Set([...(o.never ?? []), IGNORE_FILE])
  const ignored = ignore()
  const ignoreFile = join(dir, IGNORE_FILE)
  if (existsSync(ignoreFile)) ignored.add(readFileSync(ignoreFile, 'utf8'))
  for (const p of exact) {
    const segments = p.split('/')
    if (segments.some((s) => NEVER.has(s)) || [...never].some((n) => p === n || p.startsWith(`${n}/`))) {
      throw new BundleError(
        'E_BUNDLE_CONFIG_INVALID',
        `include: ${p} is never part of a bundle (node_modules, .git and the model store are always left out); ` +
          `install packages through package.json instead`,
      )
    }
  }
  const files: string[] = []
  const secrets: string[] = []
  const outside: string[] = []
  const root = realpathSync(dir)
  // `hidden`: why an enclosing directory is left out; only exact includes come back from inside it.
  const walk = (d: string, hidden: 'secret' | 'ignored' | undefined): void => {
    for (const name of readdirSync(d).sort()) {
      const full = join(d, name)
      const rel = relative(dir, full).split(sep).join('/')
      if (NEVER.has(name) || never.has(rel) || exc.some((r) => r.test(rel))) continue
      // A link is followed only inside the project, and judged by its target's name too: a
      // harmless-looking link to ~/.ssh/id_rsa must not carry the key into the bundle.
      let linkedSecret = false
      if (lstatSync(full).isSymbolicLink()) {
        let target: string
        try {
          target = realpathSync(full)
        } catch {
          continue // dangling
        }
        const within = relative(root, target)
        if (within.startsWith('..') || isAbsolute(within)) {
          outside.push(rel)
          continue
        }
        linkedSecret = within.split(sep).some(looksSecret)
      }
      const st = statSync(full)
      const isDir = st.isDirectory()
      const why =
        hidden ??
        (looksSecret(name) || linkedSecret
          ? 'secret'
          : ignored.ignores(isDir ? `${rel}/` : rel)
            ? 'ignored'
            : undefined)
      if (isDir) {
        // An ignored directory may be large (data, build output): entered only for an exact include.
        if (why === 'ignored' && ![...exact].some((p) => p.startsWith(`${rel}/`))) continue
        walk(full, why)
      } else if (st.isFile()) {
        if (why !== undefined) {
          if (exact.has(rel)) files.push(rel)
          else if (why === 'secret') secrets.push(rel)
        } else if (inc ? inc.some((r) => r.test(rel)) : !SOURCE.test(rel)) files.push(rel)
      }
    }
  }
  walk(dir, undefined)
  return { files, secrets, outside }
}
