/**
 * A file path inside a model: relative, POSIX separators, no "." / ".." / empty segments,
 * no control characters. The same rule guards saved inputs and archive entries.
 */
const MAX_PATH = 1024

export function isSafeModelPath(p: string): boolean {
  if (typeof p !== 'string' || p.length === 0 || p.length > MAX_PATH) return false
  if (p.startsWith('/') || p.includes('\\') || /^[A-Za-z]:/.test(p)) return false
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(p)) return false
  return p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..')
}
