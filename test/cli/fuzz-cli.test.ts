import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { bundle } from '../utils/cli.js'
import { snapshot, tempDir } from '../utils/tmp.js'

// Property: the CLI given bad tags, unknown flags, missing files and junk arguments ends with
// exit 1 or 2 and exactly one line `error E_CODE: message` — never a stack trace — and leaves
// the store as it was. Real processes (the installed launcher). The seed is printed.

const RUNS = Number(process.env.FUZZ_CLI_RUNS ?? 60)
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31)

describe('fuzzed command lines', () => {
  it(`${RUNS} generated invocations: one clear line, the right exit code, nothing written (seed ${SEED})`, {
    timeout: 600_000,
  }, async () => {
    console.log(`# cli fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED})`)
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home, BUNDLE_REDIS_URL: '' }
    // An initialised, empty store: what it holds must not change.
    assert.equal((await bundle(['models', 'list'], env)).code, 0)
    const before = snapshot(home)
    const junk = fc.oneof(
      fc.string({ minLength: 1, maxLength: 12 }),
      fc.constantFrom(
        'ocr-cls',
        'ocr-cls:latest',
        'a:b:c',
        'UPPER:1.0',
        '../../etc/passwd',
        ':',
        '@sha256:zz',
        'x@',
        '-',
        '--',
        '',
        ' ',
        'name:1.0.0',
        'ε:ω',
        '%00',
        'a'.repeat(300),
      ),
    )
    const flag = fc.constantFrom(
      '--nope',
      '-z',
      '--port',
      'abc',
      '--version',
      '-o',
      'xml',
      '--label',
      'noequals',
      '--force',
      '-y',
      '--redis',
      'http://x',
      '--concurrency',
      '0',
      '--runners',
      'far',
      '--image',
      '--min',
      '-1',
    )
    const missing = fc
      .string({ minLength: 1, maxLength: 10 })
      .map((s) => join(tempDir(), `missing-${encodeURIComponent(s)}`))
    const command = fc.oneof(
      fc
        .tuple(
          fc.constantFrom(
            ['models', 'get'],
            ['models', 'delete'],
            ['models', 'export'],
            ['get'],
            ['delete'],
            ['export'],
            ['deploy', 'k8s'],
            ['containerize'],
          ),
          junk,
        )
        .map(([c, t]) => [...c, t, ...(c[0] === 'delete' || c[1] === 'delete' ? ['-y'] : [])]),
      fc
        .tuple(fc.constantFrom(['models', 'import'], ['import'], ['build'], ['models', 'save']), missing)
        .map(([c, p]) => [...c, p]),
      fc
        .tuple(
          fc.constantFrom(['serve'], ['worker']),
          fc.oneof(
            junk,
            missing.map((p) => `${p}.ts`),
          ),
        )
        .map(([c, e]) => [...c, e]),
      fc
        .tuple(
          fc.constantFrom(
            ['models', 'list'],
            ['list'],
            ['models', 'verify'],
            ['serve', 'x.ts'],
            ['worker', 'x.ts'],
            ['models', 'loaded'],
          ),
          fc.array(flag, { minLength: 1, maxLength: 3 }),
        )
        .map(([c, f]) => [...c, ...f]),
      fc.array(junk, { minLength: 1, maxLength: 3 }),
    )
    let failures = 0
    await fc.assert(
      fc.asyncProperty(command, async (args) => {
        const r = await bundle(args, env)
        const where = `bundle ${args.map((a) => JSON.stringify(a)).join(' ')} → ${r.code}: ${r.stderr.slice(0, 400)}`
        assert.ok(r.code === 0 || r.code === 1 || r.code === 2, where)
        assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at |node:internal|\.ts:\d+:\d+/, `no stack trace: ${where}`)
        if (r.code !== 0) {
          failures++
          assert.match(r.stderr, /^error E_[A-Z_]+: [^\n]+\n$/, `one line: ${where}`)
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
    assert.ok(failures > RUNS / 2, `most generated invocations are bad input (${failures} of ${RUNS} failed)`)
    assert.deepEqual(snapshot(home), before, 'the store is unchanged')
  })
})
