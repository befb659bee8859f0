import { randomInt } from 'node:crypto'

// Crockford base32, lower case: no i, l, o, u — safe in tags and unambiguous when read aloud.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'
const TIME_CHARS = 10 // 50 bits of milliseconds: sortable until the year 37648
const RANDOM_CHARS = 6 // 30 bits: two processes saving in the same millisecond still differ

let lastTime = -1
let lastRandom: number[] = []

function encodeTime(ms: number): string {
  let out = ''
  let rest = ms
  for (let i = 0; i < TIME_CHARS; i++) {
    out = ALPHABET[rest % 32] + out
    rest = Math.floor(rest / 32)
  }
  return out
}

/** Increments a base32 digit array in place; within one millisecond versions stay increasing. */
function increment(digits: number[]): void {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i]! < 31) {
      digits[i]!++
      return
    }
    digits[i] = 0
  }
}

/**
 * A 16-character version that sorts by creation time (like a ULID, in lower-case base32).
 * Within one process versions are strictly increasing even inside one millisecond.
 */
export function generateVersion(now: number = Date.now()): string {
  if (now <= lastTime) {
    increment(lastRandom)
  } else {
    lastTime = now
    lastRandom = Array.from({ length: RANDOM_CHARS }, () => randomInt(32))
    lastRandom[0] = lastRandom[0]! & 0b01111 // headroom so increments do not wrap within a millisecond
  }
  return encodeTime(lastTime) + lastRandom.map((d) => ALPHABET[d]).join('')
}
