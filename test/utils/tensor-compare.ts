// Element-for-element comparison of two tensors. Against a corpus's expected outputs, floats
// are compared as the ONNX backend tests compare them (|a − e| ≤ atol + rtol·|e|, NaN equals
// NaN); served answers against raw onnxruntime must be identical (tolerance 0).

export interface Comparable {
  dtype: string
  shape: readonly number[]
  data: ArrayLike<number | bigint | string | boolean>
}

export interface Tolerance {
  rtol: number
  atol: number
}

export const EXACT: Tolerance = { rtol: 0, atol: 0 }
export const ONNX_BACKEND: Tolerance = { rtol: 1e-3, atol: 1e-7 }

/** IEEE half precision bits → number. */
export function halfToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >> 10) & 0x1f
  const f = h & 0x3ff
  if (e === 0) return s * f * 2 ** -24
  if (e === 31) return f ? Number.NaN : s * Number.POSITIVE_INFINITY
  return s * (1 + f / 1024) * 2 ** (e - 15)
}

const value = (dtype: string, v: number | bigint | string | boolean): number | bigint | string => {
  if (typeof v === 'boolean') return v ? 1 : 0
  if (dtype === 'float16' && typeof v === 'number') return halfToNumber(v)
  return v
}

/** undefined when equal; else what differs first. */
export function difference(actual: Comparable, expected: Comparable, tol: Tolerance = EXACT): string | undefined {
  if (actual.shape.length !== expected.shape.length || actual.shape.some((d, i) => d !== expected.shape[i]))
    return `shape [${actual.shape.join(',')}], expected [${expected.shape.join(',')}]`
  if (actual.data.length !== expected.data.length)
    return `${actual.data.length} values, expected ${expected.data.length}`
  const float = /^float|^bfloat/.test(expected.dtype)
  for (let i = 0; i < expected.data.length; i++) {
    const a = value(actual.dtype, actual.data[i]!)
    const e = value(expected.dtype, expected.data[i]!)
    // Exact means the same value bit for bit: -0 is not 0, NaN is NaN.
    if (tol === EXACT ? Object.is(a, e) : a === e) continue
    if (float && typeof a === 'number' && typeof e === 'number' && tol !== EXACT) {
      if (Number.isNaN(a) && Number.isNaN(e)) continue
      if (Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e)) continue
    } else if (typeof a === 'bigint' || typeof e === 'bigint') {
      if (BigInt(a as number) === BigInt(e as number)) continue
    }
    return `element ${i}: ${String(a)}, expected ${String(e)}`
  }
  return undefined
}
