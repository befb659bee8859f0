import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { hasLongIntegers, parseLenientJson, parseTensorJson } from '../../framework/io/lenient-json.js'
import { fromHalf, toHalf, valuesToJson, valuesToTyped } from '../../framework/io/tensor-values.js'

// Tensor values in JSON lose nothing, both ways: the pure parts, checked against known values
// and, where a property says it all, against every value fast-check can think of.

const list = (a: ArrayLike<unknown>): unknown[] => Array.from(a)

const code = (fn: () => unknown) => {
  try {
    fn()
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message }
  }
  return undefined
}

describe('lenient JSON', () => {
  it('keeps integers past 2^53 exact, as BigInts, and reads NaN and Infinity tokens', () => {
    assert.deepEqual(parseLenientJson('[9007199254740993, -9223372036854775808, 18446744073709551615, 12]'), [
      9007199254740993n,
      -9223372036854775808n,
      18446744073709551615n,
      12,
    ])
    const v = parseLenientJson('{"a": [NaN, Infinity, -Infinity, Inf, -Inf, +Infinity, 1.5e3, -0.0]}') as {
      a: number[]
    }
    assert.ok(Number.isNaN(v.a[0]))
    assert.deepEqual(v.a.slice(1), [Infinity, -Infinity, Infinity, -Infinity, Infinity, 1500, -0])
    assert.ok(Object.is(v.a[7], -0))
  })

  it('parses what JSON.parse parses, the same way (strings, escapes, nesting, __proto__ as a key)', () => {
    // Integers past 2^53 come back exact (BigInt) where JSON.parse rounds them: as numbers they agree.
    const rounded = (v: unknown): unknown =>
      typeof v === 'bigint'
        ? Number(v)
        : Array.isArray(v)
          ? v.map(rounded)
          : v !== null && typeof v === 'object'
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, rounded(x)]))
            : v
    fc.assert(
      fc.property(fc.json(), (text) => {
        assert.deepEqual(rounded(parseLenientJson(text, 1000)), JSON.parse(text))
      }),
      { numRuns: 300 },
    )
    const o = parseLenientJson('{"__proto__": {"x": 1}, "s": "a\\"b\\\\c\\u00e9"}') as Record<string, unknown>
    assert.deepEqual(Object.getPrototypeOf(o), Object.prototype)
    assert.deepEqual(Object.getOwnPropertyDescriptor(o, '__proto__')?.value, { x: 1 })
    assert.equal(o.s, 'a"b\\cé')
  })

  it('refuses malformed text with where it went wrong, and nesting past its limit', () => {
    for (const bad of ['{', '[1,]', '{"a" 1}', 'NaNa', '[1] x', '"open', '-', '[Infinit]'])
      assert.equal(code(() => parseLenientJson(bad))?.code, 'E_INPUT_INVALID', bad)
    assert.match(code(() => parseLenientJson('[1,]'))!.message, /position 3/)
    assert.match(code(() => parseLenientJson(`${'['.repeat(100)}${']'.repeat(100)}`))!.message, /deeper than 64/)
  })

  it('tells which bodies JSON.parse would round (long integers), and leaves others to it', () => {
    assert.equal(hasLongIntegers('{"data":[1,2,3]}'), false)
    assert.equal(hasLongIntegers('{"data":[0.30120906233787537]}'), false, 'digits after a decimal point')
    assert.equal(hasLongIntegers('{"data":[1.2345678901234567e-7]}'), false)
    assert.equal(hasLongIntegers('{"data":[9007199254740993]}'), true)
    assert.equal(hasLongIntegers('[-18446744073709551615]'), true)
    assert.deepEqual(parseTensorJson('{"d":[9007199254740993]}'), { d: [9007199254740993n] })
    assert.deepEqual(parseTensorJson('{"d":[1,2]}'), { d: [1, 2] })
    assert.equal(code(() => parseTensorJson('{"d":'))?.code, 'E_INPUT_INVALID')
  })
})

describe('half precision', () => {
  it('every half survives number → half → number, and numbers round to the nearest half (ties to even)', () => {
    for (let h = 0; h < 0x10000; h++) {
      const v = fromHalf(h)
      if (Number.isNaN(v)) assert.ok(Number.isNaN(fromHalf(toHalf(v))))
      else assert.equal(toHalf(v), h, `0x${h.toString(16)}`)
    }
    // Halfway between 1 and the next half (1 + 2^-10) rounds to even: 1; a hair above rounds up.
    assert.equal(toHalf(1 + 2 ** -11), 0x3c00)
    assert.equal(toHalf(1 + 2 ** -11 + 2 ** -20), 0x3c01)
    assert.equal(toHalf(65504), 0x7bff)
    assert.equal(toHalf(65519.99), 0x7bff)
    assert.equal(toHalf(65520), 0x7c00, 'halfway past the largest half is Infinity')
    assert.equal(toHalf(2 ** -24), 0x0001, 'the smallest subnormal')
    assert.equal(toHalf(2 ** -26), 0x0000)
    assert.equal(toHalf(-0), 0x8000)
    assert.equal(toHalf(Number.NaN), 0x7e00)
  })
})

describe('values to typed arrays', () => {
  it('checks each integer against its type, and reads decimal strings and BigInts exactly', () => {
    assert.deepEqual(list(valuesToTyped('int8', [-128, 127, '5'], 'x')), [-128, 127, 5])
    assert.deepEqual(list(valuesToTyped('uint64', [18446744073709551615n, '42'], 'x')), [18446744073709551615n, 42n])
    assert.deepEqual(list(valuesToTyped('int64', [-(2n ** 63n)], 'x')), [-(2n ** 63n)])
    const out = code(() => valuesToTyped('int8', [1, 300], 'input "x"'))
    assert.equal(out?.code, 'E_INPUT_INVALID')
    assert.match(out!.message, /input "x": data\[1\] is 300, out of range \[-128, 127\] \(INT8\)/)
    assert.match(code(() => valuesToTyped('uint32', [-1], 'x'))!.message, /out of range/)
    assert.match(code(() => valuesToTyped('uint64', [2n ** 64n], 'x'))!.message, /out of range/)
    assert.match(code(() => valuesToTyped('int32', [1.5], 'x'))!.message, /not an integer/)
    assert.match(code(() => valuesToTyped('int16', [null], 'x'))!.message, /not an integer/)
  })

  it('reads booleans, floats with the NaN/Infinity words, and rounds FP16 to halves', () => {
    assert.deepEqual(list(valuesToTyped('bool', [true, false, 1, 0], 'x')), [1, 0, 1, 0])
    assert.match(code(() => valuesToTyped('bool', ['yes'], 'x'))!.message, /not true or false \(BOOL\)/)
    const f = valuesToTyped('float32', [0.1, 'NaN', '-Infinity', 'inf', Infinity], 'x') as Float32Array
    assert.equal(f[0], Math.fround(0.1))
    assert.ok(Number.isNaN(f[1]))
    assert.deepEqual([f[2], f[3], f[4]], [-Infinity, Infinity, Infinity])
    assert.deepEqual(list(valuesToTyped('float16', [1, -2, 65504, 1e6], 'x')), [0x3c00, 0xc000, 0x7bff, 0x7c00])
    assert.match(code(() => valuesToTyped('float64', ['one'], 'x'))!.message, /not a number \(FP64\)/)
  })
})

describe('typed arrays to JSON', () => {
  it('writes values that parse back to the same bits: -0, NaN and ±Infinity tokens, exact 64-bit integers', () => {
    assert.equal(
      valuesToJson({ dtype: 'float32', data: Float32Array.of(0.1, -0, Number.NaN, -Infinity) }),
      '[0.10000000149011612,-0,NaN,-Infinity]',
    )
    assert.equal(
      valuesToJson({ dtype: 'int64', data: BigInt64Array.of(-(2n ** 63n), 9007199254740993n) }),
      '[-9223372036854775808,9007199254740993]',
    )
    assert.equal(valuesToJson({ dtype: 'uint64', data: BigUint64Array.of(2n ** 64n - 1n) }), '[18446744073709551615]')
    assert.equal(valuesToJson({ dtype: 'bool', data: Uint8Array.of(1, 0) }), '[true,false]')
    assert.equal(
      valuesToJson({ dtype: 'float16', data: Uint16Array.of(0x3c00, 0x8000, 0x7c00, 0x7e00) }),
      '[1,-0,Infinity,NaN]',
    )
    assert.equal(valuesToJson({ dtype: 'string', data: ['a"b', 'é', ''] }), '["a\\"b","é",""]')
    fc.assert(
      fc.property(fc.float64Array({ maxLength: 20 }), (arr) => {
        // What a server does with the answer's values: a float input takes BigInts (2^60 written whole) as numbers.
        const back = valuesToTyped(
          'float64',
          parseLenientJson(valuesToJson({ dtype: 'float64', data: arr })) as [],
          'x',
        )
        assert.equal(back.length, arr.length)
        for (let i = 0; i < arr.length; i++) assert.ok(Object.is(back[i], arr[i]), `${arr[i]}`)
      }),
    )
  })
})
