import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { compileErrorMessage } from '../../cli/compile-error.js'
import { bundle } from '../utils/cli.js'
import { tempDir, writeFile } from '../utils/tmp.js'

/** A project directory, as `npm init` and a "type": "module" make one. */
function esmDir(): string {
  const dir = tempDir()
  writeFile(dir, 'package.json', '{ "type": "module" }\n')
  return dir
}

// A service that does not compile is reported as tsc and esbuild report it: file:line:column,
// the message and the source line, on stderr without a stack — by `bundle serve` and `bundle build`.

describe('a service in a CommonJS package', () => {
  it('bundle serve says it would load as CommonJS and how to make it an ES module', { timeout: 60_000 }, async () => {
    const dir = tempDir()
    writeFile(dir, 'package.json', '{ "name": "old-style" }\n')
    const file = writeFile(dir, 'service.ts', "import { service } from 'modelbundle'\nexport const x = service\n")
    const r = await bundle(['serve', file, '--port', '0'], { BUNDLE_HOME: join(dir, 'home') })
    assert.equal(r.code, 1)
    assert.equal(
      r.stderr,
      `error E_SERVICE_LOAD: ${file} would load as CommonJS (${join(dir, 'package.json')} has no "type": "module"); ` +
        'services and runner modules are ES modules: add "type": "module" to the project\'s package.json, or name ' +
        'the file .mts (.mjs)\n',
    )
    assert.equal(r.stdout, '', 'nothing listens')
  })
})

describe('a service that does not compile', () => {
  it('bundle serve names the file, line and column, shows the line, and prints no stack', {
    timeout: 60_000,
  }, async () => {
    const dir = esmDir()
    const file = writeFile(dir, 'service.ts', 'export class Broken {\n  hello() {\n    return 1\n  }\n}\n}\n')
    const r = await bundle(['serve', file, '--port', '0'], { BUNDLE_HOME: join(dir, 'home') })
    assert.equal(r.code, 1)
    assert.equal(r.stderr, `error E_SERVICE_LOAD: ${file}:6:1: Unexpected "}"\n  6 | }\n    | ^\n`)
    assert.equal(r.stdout, '', 'nothing listens')
  })

  it('bundle build of a service whose imported module does not compile: that module, and which service', {
    timeout: 60_000,
  }, async () => {
    const dir = esmDir()
    const service = writeFile(dir, 'service.ts', "import { helper } from './helper.js'\nexport const x = helper\n")
    const helper = writeFile(dir, 'helper.ts', "export const helper = {\n\tname: 'é' 'y',\n}\n")
    writeFile(dir, 'bundle.yaml', 'service: service.ts\n')
    const r = await bundle(['build', dir], { BUNDLE_HOME: join(dir, 'home') })
    assert.equal(r.code, 1)
    // The column counts characters (é is two bytes), and the caret keeps the line's tab.
    assert.equal(
      r.stderr,
      `error E_SERVICE_LOAD: ${helper}:2:12: Expected "}" but found "'y'"\n` +
        `  2 | \tname: 'é' 'y',\n` +
        `    | \t          ^\n` +
        `(while importing ${service})\n`,
    )
  })

  it('an error that is not a compile error is reported as before: its first line', { timeout: 60_000 }, async () => {
    const dir = esmDir()
    const file = writeFile(dir, 'service.ts', "throw new Error('no config here\\nsecond line')\nexport {}\n")
    const r = await bundle(['serve', file, '--port', '0'], { BUNDLE_HOME: join(dir, 'home') })
    assert.equal(r.code, 1)
    assert.equal(r.stderr, `error E_SERVICE_LOAD: importing ${file} failed: no config here\n`)
  })
})

describe('compileErrorMessage', () => {
  it("reads esbuild's errors array where the error still has it (the in-process API)", () => {
    const err = Object.assign(new Error('Build failed with 2 errors'), {
      errors: [
        { text: 'first', location: { file: '/a/s.ts', line: 3, column: 4, lineText: 'let x = = 1' } },
        { text: 'second', location: { file: '/a/t.ts', line: 1, column: 0, lineText: '}' } },
      ],
    })
    assert.equal(
      compileErrorMessage(err, '/a/s.ts'),
      '/a/s.ts:3:5: first\n  3 | let x = = 1\n    |     ^\n\n/a/t.ts:1:1: second\n  1 | }\n    | ^\n' +
        '(while importing /a/s.ts)',
    )
  })

  it("reads tsx's message, where only the text crosses its loader thread; an .mts file by its own name", () => {
    const dir = esmDir()
    const file = writeFile(dir, 'svc.mts', 'export const a = 1\n}\n')
    // tsx hands an .mts file to esbuild under its .ts name.
    const err = new Error(`Transform failed with 1 error:\n${join(dir, 'svc.ts')}:2:0: ERROR: Unexpected "}"`)
    assert.equal(compileErrorMessage(err, file), `${file}:2:1: Unexpected "}"\n  2 | }\n    | ^`)
  })

  it('shows a long (minified) line as a window around the column; no message for other errors', () => {
    const line = `${'a'.repeat(1000)}!${'b'.repeat(1000)}`
    const err = {
      message: 'x',
      errors: [{ text: 'bad', location: { file: '/m.js', line: 1, column: 1000, lineText: line } }],
    }
    const [head, source, caret] = compileErrorMessage(err, '/m.js')!.split('\n')
    assert.equal(head, '/m.js:1:1001: bad')
    assert.ok(source!.length < 200, 'the line is cut')
    assert.equal(source![caret!.indexOf('^')], '!', 'the caret is under the error')
    assert.equal(compileErrorMessage(new Error('Cannot find module x'), '/m.js'), undefined)
    assert.equal(compileErrorMessage('a string', '/m.js'), undefined)
  })
})
