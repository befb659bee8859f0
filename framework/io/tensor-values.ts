import { BundleError } from '../../errors/index.js'
import { TYPED_ARRAYS, type NumericTensor, type RunnerDType } from '../../runners/index.js'

// Tensor values in JSON, both ways, for every dtype: what a client wrote (numbers, booleans,
// BigInts from the lenient parser, the strings "NaN"/"Infinity") into typed arrays with each
// value checked against its type's range, and typed arrays back into JSON text that loses
// nothing — 64-bit integers as exact digits, NaN and ±Infinity as the tokens Python and Triton
// write, -0 kept, half precision as numbers.

const bad = (msg: string) => new BundleError('E_INPUT_INVALID', msg)

const INT_RANGES: Partial<Record<RunnerDType, readonly [bigint, bigint]>> = {
  int8: [-128n, 127n],
  uint8: [0n, 255n],
  int16: [-32768n, 32767n],
  uint16: [0n, 65535n],
  int32: [-2147483648n, 2147483647n],
  uint32: [0n, 4294967295n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
}

const FLOAT_WORDS: Record<string, number> = {
  nan: Number.NaN,
  inf: Infinity,
  '+inf': Infinity,
  '-inf': -Infinity,
  infinity: Infinity,
  '+infinity': Infinity,
  '-infinity': -Infinity,
}

const roundHalfEven = (x: number): number => {
  const f = Math.floor(x)
  const r = x - f
  return r > 0.5 || (r === 0.5 && f % 2 === 1) ? f + 1 : f
}

/** A number to IEEE half precision bits, rounded to nearest even from the double (as numpy's float16 does). */
export function toHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00
  const sign = value < 0 || (value === 0 && 1 / value < 0) ? 0x8000 : 0
  const a = Math.abs(value)
  // 65520 is halfway between the largest half (65504) and the next power: it and above round to Infinity.
  if (a >= 65520) return sign | 0x7c00
  // Subnormal halves are multiples of 2^-24 (a rounding up to 1024 of them is the smallest normal: same bits).
  if (a < 2 ** -14) return sign | roundHalfEven(a * 2 ** 24)
  let e = Math.floor(Math.log2(a))
  if (2 ** e > a) e--
  else if (2 ** (e + 1) <= a) e++
  // Both steps are exact in a double; a mantissa rounding up to 1024 carries into the exponent.
  const bits = ((e + 15) << 10) + roundHalfEven((a / 2 ** e - 1) * 1024)
  return sign | Math.min(bits, 0x7c00)
}

/** IEEE half precision bits to a number. */
export function fromHalf(h: number): number {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >> 10) & 0x1f
  const f = h & 0x3ff
  if (e === 0) return s * f * 2 ** -24
  if (e === 31) return f ? Number.NaN : s * Infinity
  return s * (1 + f / 1024) * 2 ** (e - 15)
}

const label = (dtype: RunnerDType) =>
  ({ float16: 'FP16', float32: 'FP32', float64: 'FP64', bool: 'BOOL' })[dtype as string] ?? dtype.toUpperCase()

/** A JSON value as a float: numbers, and the words NaN, Infinity, -Infinity, inf in any case. */
function floatOf(v: unknown): number | undefined {
  if (typeof v === 'number') return v
  if (typeof v === 'bigint') return Number(v)
  if (typeof v === 'string') return FLOAT_WORDS[v.trim().toLowerCase()]
  return undefined
}

/** A JSON value as an exact integer: integral numbers, BigInts, and decimal strings. */
function integerOf(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') return v
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : undefined
  if (typeof v === 'string' && /^\s*[-+]?\d+\s*$/.test(v)) return BigInt(v.trim())
  return undefined
}

/**
 * Row-major values of one input as its dtype's typed array; `where` names the input in errors.
 * Integers must be whole and within their type's range (300 is no INT8), booleans true/false
 * (or 0/1), floats numbers or the NaN/Infinity words; FP16 values are rounded to half precision.
 */
export function valuesToTyped(dtype: RunnerDType, values: readonly unknown[], where: string): NumericTensor['data'] {
  const arr = new TYPED_ARRAYS[dtype](values.length)
  const wrong = (i: number, why: string) => bad(`${where}: data[${i}] is ${show(values[i])}, ${why} (${label(dtype)})`)
  if (dtype === 'bool') {
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      if (v !== true && v !== false && v !== 0 && v !== 1) throw wrong(i, 'not true or false')
      arr[i] = v ? 1 : 0
    }
    return arr as NumericTensor['data']
  }
  if (dtype === 'float32' || dtype === 'float64' || dtype === 'float16') {
    const half = dtype === 'float16'
    for (let i = 0; i < values.length; i++) {
      const v = floatOf(values[i])
      if (v === undefined) throw wrong(i, 'not a number')
      arr[i] = half ? toHalf(v) : v
    }
    return arr as NumericTensor['data']
  }
  const [min, max] = INT_RANGES[dtype]!
  const big = dtype === 'int64' || dtype === 'uint64'
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    // The common case first: a safe integer in range needs no BigInt.
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= Number(min) && v <= Number(max)) {
      ;(arr as unknown as (number | bigint)[])[i] = big ? BigInt(v) : v
      continue
    }
    const n = integerOf(v)
    if (n === undefined) throw wrong(i, 'not an integer')
    if (n < min || n > max) throw wrong(i, `out of range [${min}, ${max}]`)
    ;(arr as unknown as (number | bigint)[])[i] = big ? n : Number(n)
  }
  return arr as NumericTensor['data']
}

const show = (v: unknown) => (typeof v === 'bigint' ? v.toString() : (JSON.stringify(v) ?? String(v)))

/** A float as JSON text that parses back to the same double: NaN, Infinity, -Infinity as tokens, -0 kept. */
const floatText = (v: number): string => (v === 0 && 1 / v < 0 ? '-0' : String(v))

/**
 * A tensor's values as the text of a flat JSON array. NaN and ±Infinity are written as the
 * tokens Python's json and Triton write (strict JSON has no such numbers: ask for binary output
 * to avoid them); 64-bit integers as exact digits; booleans as true/false; FP16 as numbers.
 */
export function valuesToJson(t: { dtype: string; data: ArrayLike<unknown> }): string {
  const data = t.data
  if (t.dtype === 'string') return JSON.stringify(data)
  if (t.dtype === 'bool') return `[${Array.from(data as Uint8Array, (v) => (v ? 'true' : 'false')).join(',')}]`
  if (t.dtype === 'float16') return `[${Array.from(data as Uint16Array, (h) => floatText(fromHalf(h))).join(',')}]`
  if (t.dtype === 'float32' || t.dtype === 'float64') {
    const f = data as Float32Array | Float64Array
    // A typed array's own join writes NaN, Infinity and -Infinity as such; only -0 needs a look.
    let negativeZero = false
    for (let i = 0; i < f.length; i++)
      if (f[i] === 0 && 1 / f[i]! < 0) {
        negativeZero = true
        break
      }
    return negativeZero ? `[${Array.from(f, floatText).join(',')}]` : `[${f.join(',')}]`
  }
  // Integers, BigInts included: join writes exact digits.
  return `[${(data as Int32Array).join(',')}]`
}
