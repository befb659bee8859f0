import { BundleError } from '../../errors/index.js'

// JSON as tensor clients write it, which JSON.parse loses or refuses: integers past 2^53 (an
// INT64 or UINT64 value must arrive exact, not rounded to the nearest double) and the NaN,
// Infinity and -Infinity tokens that Python's json module and Triton's server write for floats.
// Used only where JSON.parse cannot be trusted with a body (see needsExactParse): every other
// body takes the native parser's speed.

/** Integers past 2^53 become BigInts; NaN, Infinity, -Infinity (and Inf, +Infinity) become numbers. */
export function parseLenientJson(text: string, maxDepth = 64): unknown {
  let at = 0
  const fail = (what: string): never => {
    throw new BundleError('E_INPUT_INVALID', `the body is not valid JSON: ${what} at position ${at}`)
  }
  const space = () => {
    while (at < text.length) {
      const c = text.charCodeAt(at)
      if (c !== 32 && c !== 10 && c !== 13 && c !== 9) return
      at++
    }
  }
  const word = (w: string, v: unknown) => {
    if (text.startsWith(w, at)) {
      at += w.length
      return v
    }
    return fail(`unexpected "${text.slice(at, at + 8)}"`)
  }
  const number = (): number | bigint => {
    const m = /^-?(?:\d+)(\.\d+)?([eE][-+]?\d+)?/.exec(text.slice(at, at + 400))
    if (m === null) return fail('a malformed number')
    at += m[0].length
    const n = Number(m[0])
    // Exact integers only where a double would round them.
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) return BigInt(m[0])
    return n
  }
  const string = (): string => {
    const start = at
    at++ // the opening quote
    let escaped = false
    while (at < text.length) {
      const c = text.charCodeAt(at)
      if (c === 92) escaped = true
      if (c === 34) break
      at += c === 92 ? 2 : 1
    }
    if (at >= text.length) return fail('an unterminated string')
    at++
    const raw = text.slice(start, at)
    if (!escaped) return raw.slice(1, -1)
    try {
      return JSON.parse(raw) as string
    } catch {
      return fail('a malformed string')
    }
  }
  const value = (depth: number): unknown => {
    if (depth > maxDepth) return fail(`nesting deeper than ${maxDepth}`)
    space()
    const c = text[at]
    if (c === '{') return object(depth)
    if (c === '[') return array(depth)
    if (c === '"') return string()
    if (c === 't') return word('true', true)
    if (c === 'f') return word('false', false)
    if (c === 'n') return word('null', null)
    if (c === 'N') return word('NaN', Number.NaN)
    if (c === 'I') return text.startsWith('Infinity', at) ? word('Infinity', Infinity) : word('Inf', Infinity)
    if (c === '+' && text[at + 1] === 'I') {
      at++
      return value(depth)
    }
    if (c === '-' && text[at + 1] === 'I') {
      at++
      return -(value(depth) as number)
    }
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return number()
    return fail(c === undefined ? 'an unexpected end' : `unexpected "${c}"`)
  }
  const array = (depth: number): unknown[] => {
    at++
    const out: unknown[] = []
    space()
    if (text[at] === ']') {
      at++
      return out
    }
    for (;;) {
      out.push(value(depth + 1))
      space()
      if (text[at] === ',') at++
      else if (text[at] === ']') {
        at++
        return out
      } else return fail('expected "," or "]"')
    }
  }
  const object = (depth: number): Record<string, unknown> => {
    at++
    const out: Record<string, unknown> = {}
    space()
    if (text[at] === '}') {
      at++
      return out
    }
    for (;;) {
      space()
      if (text[at] !== '"') return fail('expected a key')
      const key = string()
      space()
      if (text[at] !== ':') return fail('expected ":"')
      at++
      const v = value(depth + 1)
      // As JSON.parse does, a "__proto__" key is an own property, never the prototype.
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true })
      space()
      if (text[at] === ',') at++
      else if (text[at] === '}') {
        at++
        return out
      } else return fail('expected "," or "}"')
    }
  }
  const out = value(0)
  space()
  if (at !== text.length) fail('trailing characters')
  return out
}

/**
 * Whether a body JSON.parse read may have lost something: it refused it (NaN or Infinity tokens
 * can be why), or an integer there is past 2^53. The check is a scan of the text, cheap next to
 * the parse: an integer of 16 or more digits is the only kind that can be unsafe.
 */
export function hasLongIntegers(text: string): boolean {
  return /(?:^|[^\d.eE"\\])-?\d{16,}(?![\d.eE])/.test(text)
}

/** JSON.parse, or the lenient parser where JSON.parse would refuse or round the body. */
export function parseTensorJson(text: string): unknown {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    // NaN and Infinity tokens are refused by JSON.parse; anything else the lenient parser refuses too.
    try {
      return parseLenientJson(text)
    } catch {
      throw new BundleError('E_INPUT_INVALID', `the body is not valid JSON: ${(err as Error).message}`)
    }
  }
  return hasLongIntegers(text) ? parseLenientJson(text) : parsed
}
