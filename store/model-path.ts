/**
 * A file path inside a model: relative, POSIX separators, no "." / ".." / empty segments,
 * no control characters. The same rule guards saved inputs and archive entries.
 */
const MAX_PATH = 1024

/** A path that is also a directory of another (`a` and `a/b`) cannot be laid out on disk. */
export function findPathConflict(paths: readonly string[]): [string, string] | undefined {
  const set = new Set(paths)
  for (const p of paths) {
    const parts = p.split('/')
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/')
      if (set.has(dir)) return [dir, p]
    }
  }
  return undefined
}

export function isSafeModelPath(p: string): boolean {
  if (typeof p !== 'string' || p.length === 0 || p.length > MAX_PATH) return false
  if (p.startsWith('/') || p.includes('\\') || /^[A-Za-z]:/.test(p)) return false
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it rejects
  if (/[\u0000-\u001f\u007f]/.test(p)) return false
  return p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..')
}
