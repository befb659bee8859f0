import assert from 'node:assert/strict'
import { chmodSync, existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { parse as parseYaml } from 'yaml'
import { bundle, type CliResult } from '../utils/cli.js'
import { MODELS } from '../utils/models.js'
import { tempDir, writeFile } from '../utils/tmp.js'

/** One line on stderr naming the code, no stack trace. */
function failsWith(r: CliResult, exit: number, code: string): void {
  assert.equal(r.code, exit, `exit code; stderr: ${r.stderr}`)
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines.length, 1, `one line: ${r.stderr}`)
  assert.match(lines[0]!, new RegExp(`^error ${code}: `))
  assert.doesNotMatch(r.stderr, /\n\s+at /)
}

describe('bundle models (CLI, real child processes)', () => {
  const dir = tempDir()
  const env = { BUNDLE_HOME: join(dir, 'home') }
  const run = (...args: string[]) => bundle(args, env)

  before(async () => {
    const r = await run(
      'models',
      'save',
      MODELS.cls,
      '--name',
      'ocr-cls',
      '--version',
      '1.0.0',
      '--label',
      'stage=dev',
      '--metadata',
      '{"source":"paddleocr"}',
    )
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, 'ocr-cls:1.0.0\n')
  })

  it('save prints the tag; list/get print stable JSON and YAML', async () => {
    const saved = await run('models', 'save', MODELS.cls, MODELS.keys, '--name', 'ocr-cls', '-o', 'json')
    assert.equal(saved.code, 0, saved.stderr)
    const model = JSON.parse(saved.stdout)
    assert.equal(model.version.length, 16)

    const list = JSON.parse((await run('models', 'list', '-o', 'json')).stdout) as Record<string, unknown>[]
    assert.deepEqual(
      list.map((m) => m.tag),
      [model.tag, 'ocr-cls:1.0.0'],
    )
    for (const key of [
      'tag',
      'name',
      'version',
      'digest',
      'size',
      'framework',
      'labels',
      'metadata',
      'signatures',
      'created',
    ])
      assert.ok(key in list[0]!, key)

    const filtered = JSON.parse((await run('models', 'list', '--label', 'stage=dev', '-o', 'json')).stdout) as {
      tag: string
    }[]
    assert.deepEqual(
      filtered.map((m) => m.tag),
      ['ocr-cls:1.0.0'],
    )

    const yaml = parseYaml((await run('models', 'get', 'ocr-cls@^1')).stdout)
    assert.equal(yaml.tag, 'ocr-cls:1.0.0')
    assert.deepEqual(yaml.signatures['ch_ppocr_mobile_v2.0_cls_infer.onnx'].inputs[0].shape, [-1, 3, -1, -1])
    assert.deepEqual(yaml.metadata, { source: 'paddleocr' })

    const path = (await run('models', 'get', 'ocr-cls', '-o', 'path')).stdout.trim()
    assert.deepEqual(readdirSync(path).sort(), ['ch_ppocr_mobile_v2.0_cls_infer.onnx', 'ppocr_keys_v1.txt'])

    const table = (await run('models', 'list')).stdout.split('\n')
    assert.match(table[0]!, /^Tag\s+Framework\s+Size\s+Created$/)
    assert.match(table[2]!, /^ocr-cls:1\.0\.0\s+onnx\s+565 KiB\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/)
  })

  it('usage errors exit 2 with one line', async () => {
    failsWith(await run('models', 'get', 'ocr cls'), 2, 'E_STORE_TAG_INVALID')
    failsWith(await run('models', 'list', '--bogus'), 2, 'E_CLI_USAGE')
    failsWith(await run('models', 'save', MODELS.keys), 2, 'E_CLI_USAGE')
    failsWith(await run('models', 'save', MODELS.keys, '--name', 'k', '--label', 'novalue'), 2, 'E_STORE_LABEL_INVALID')
    failsWith(
      await run('models', 'save', MODELS.keys, '--name', 'k', '--metadata', '{oops'),
      2,
      'E_STORE_METADATA_INVALID',
    )
    failsWith(
      await run('models', 'save', MODELS.keys, '--name', 'k', '--framework', 'onnx'),
      2,
      'E_STORE_FRAMEWORK_INVALID',
    )
    failsWith(await run('models', 'get', 'ocr-cls', '-o', 'xml'), 2, 'E_CLI_USAGE')
    failsWith(await run('models', 'frobnicate'), 2, 'E_CLI_USAGE')
    failsWith(await run('models', 'delete', 'ocr-cls:1.0.0'), 2, 'E_CLI_CONFIRM_REQUIRED')
  })

  it('failures exit 1 with one line', async () => {
    failsWith(await run('models', 'get', 'missing'), 1, 'E_STORE_MODEL_NOT_FOUND')
    failsWith(await run('models', 'save', join(dir, 'nope.onnx'), '--name', 'x'), 1, 'E_STORE_FILE_NOT_FOUND')
    failsWith(
      await run('models', 'save', MODELS.keys, '--name', 'ocr-cls', '--version', '1.0.0'),
      1,
      'E_STORE_TAG_EXISTS',
    )
    failsWith(await run('models', 'import', join(dir, 'nope.bundlemodel')), 1, 'E_STORE_FILE_NOT_FOUND')
    failsWith(await run('models', 'import', writeFile(dir, 'junk.bundlemodel', 'junk')), 1, 'E_ARCHIVE_CORRUPT')
    const broken = writeFile(dir, 'broken.onnx', 'not onnx')
    failsWith(await run('models', 'save', broken, '--name', 'broken'), 1, 'E_STORE_ONNX_INVALID')
  })

  it('export → import into another home → same digest; second import says already present', async () => {
    const out = join(dir, 'exports')
    const { mkdirSync } = await import('node:fs')
    mkdirSync(out)
    const exported = await run('models', 'export', 'ocr-cls:1.0.0', out)
    assert.equal(exported.code, 0, exported.stderr)
    const file = join(out, 'ocr-cls-1.0.0.bundlemodel')
    assert.ok(existsSync(file))
    const other = { BUNDLE_HOME: join(dir, 'other') }
    const first = await bundle(['models', 'import', file], other)
    assert.equal(first.stdout, 'imported ocr-cls:1.0.0\n')
    const second = await bundle(['models', 'import', file], other)
    assert.equal(second.code, 0)
    assert.match(second.stdout, /^already present: ocr-cls:1\.0\.0 \(sha256:[0-9a-f]{64}\)\n$/)
    const a = JSON.parse((await run('models', 'get', 'ocr-cls:1.0.0', '-o', 'json')).stdout)
    const b = JSON.parse((await bundle(['models', 'get', 'ocr-cls:1.0.0', '-o', 'json'], other)).stdout)
    assert.equal(b.digest, a.digest)
  })

  it(
    'export to a directory that does not exist (a path ending in "/", or the parent of a file) is a coded error ' +
      'that writes nothing',
    async () => {
      const missing = join(dir, 'no-such-dir')
      for (const out of [`${missing}/`, join(missing, 'm.bundlemodel')]) {
        const r = await run('models', 'export', 'ocr-cls:1.0.0', out)
        failsWith(r, 1, 'E_EXPORT_DIR_NOT_FOUND')
        assert.match(r.stderr, /no-such-dir/)
        assert.ok(!existsSync(missing), `nothing written for ${out}`)
      }
    },
  )

  it('verify exits 1 and names the model when a blob is damaged; delete -y then cleans up', async () => {
    const home = join(dir, 'damaged')
    const e = { BUNDLE_HOME: home }
    const f = writeFile(dir, 'w.bin', 'original weights')
    assert.equal((await bundle(['models', 'save', f, '--name', 'victim', '--version', '1.0.0'], e)).code, 0)
    const ok = await bundle(['models', 'verify'], e)
    assert.equal(ok.code, 0)
    assert.match(ok.stdout, /1 models, 1 files, .* ok/)
    const json = JSON.parse((await bundle(['models', 'get', 'victim', '-o', 'json'], e)).stdout)
    const blob = join(home, 'blobs', 'sha256', json.files[0].sha256.slice(0, 2), json.files[0].sha256)
    chmodSync(blob, 0o644)
    writeFileSync(blob, 'tampered weights')
    const bad = await bundle(['models', 'verify'], e)
    assert.equal(bad.code, 1)
    assert.match(bad.stdout, /corrupt [0-9a-f]{64} used by victim:1\.0\.0/)
    assert.match(bad.stderr, /^error E_STORE_CORRUPT/)
    const del = await bundle(['models', 'delete', 'victim:1.0.0', '-y'], e)
    assert.equal(del.stdout, 'deleted victim:1.0.0\n')
    assert.equal((await bundle(['models', 'verify'], e)).code, 0)
  })

  it('delete --all-versions removes every version of a name', async () => {
    const e = { BUNDLE_HOME: join(dir, 'versions') }
    const f = writeFile(dir, 'v.bin', 'v')
    for (const v of ['1.0.0', '1.1.0', '2.0.0'])
      assert.equal((await bundle(['models', 'save', f, '--name', 'm', '--version', v], e)).code, 0)
    const latestOnly = await bundle(['models', 'delete', 'm', '-y'], e)
    assert.equal(latestOnly.stdout, 'deleted m:2.0.0\n')
    const all = await bundle(['models', 'delete', 'm', '--all-versions', '-y'], e)
    assert.equal(all.stdout.trim().split('\n').length, 2)
    assert.deepEqual(JSON.parse((await bundle(['models', 'list', '-o', 'json'], e)).stdout), [])
  })

  it('a damaged index and a failed export write are coded one-line errors', async () => {
    const home = join(dir, 'notadb')
    const { mkdirSync, readdirSync: ls } = await import('node:fs')
    mkdirSync(home)
    writeFileSync(join(home, 'index.db'), 'this is not a sqlite database'.repeat(200))
    failsWith(await bundle(['models', 'list'], { BUNDLE_HOME: home }), 1, 'E_STORE_CORRUPT')

    const out = join(dir, 'small-disk')
    mkdirSync(out)
    const { spawnSync } = await import('node:child_process')
    const { BIN } = await import('../utils/cli.js')
    // ulimit -f makes writes past 100 KiB fail with EFBIG, as a full disk would.
    const r = spawnSync(
      'bash',
      ['-c', `ulimit -f 100; exec "${process.execPath}" "${BIN}" models export ocr-cls:1.0.0 "${out}"`],
      { env: { ...process.env, ...env }, encoding: 'utf8' },
    )
    failsWith({ code: r.status, stdout: r.stdout, stderr: r.stderr }, 1, 'E_STORE_IO')
    assert.deepEqual(ls(out), [], 'no partial file left behind')
  })

  it('--help and --version exit 0', async () => {
    const help = await run('models', '--help')
    assert.equal(help.code, 0)
    for (const cmd of ['save', 'list', 'get', 'delete', 'export', 'import', 'verify', 'gc'])
      assert.match(help.stdout, new RegExp(`\\b${cmd}\\b`))
    assert.match((await run('--version')).stdout, /^\d+\.\d+\.\d+\n$/)
  })

  it(
    'no command at all (bundle, bundle --) is one usage ' + 'line and exit 2 (found by the CLI fuzz, seed 1018238208)',
    async () => {
      for (const args of [[], ['--']]) failsWith(await run(...args), 2, 'E_CLI_USAGE')
    },
  )
})

describe('progress bar', () => {
  it('draws on a terminal and stays silent when stderr is not one', { timeout: 60_000 }, async () => {
    const dir = tempDir()
    const { openSync, ftruncateSync, closeSync } = await import('node:fs')
    const big = join(dir, 'big.bin')
    const fd = openSync(big, 'w')
    ftruncateSync(fd, 64 * 1024 * 1024)
    closeSync(fd)
    const { spawnSync } = await import('node:child_process')
    const { BIN } = await import('../utils/cli.js')
    // `script` gives the command a pseudo-terminal, as a user's shell would.
    const tty = spawnSync(
      'script',
      ['-qefc', `${process.execPath} ${BIN} models save ${big} --name big`, '/dev/null'],
      { env: { ...process.env, BUNDLE_HOME: join(dir, 'tty') }, encoding: 'utf8' },
    )
    assert.equal(tty.status, 0, tty.stdout)
    assert.match(tty.stdout, /saving big \[#+\] 100% 64\.0 MiB\/64\.0 MiB/)
    const piped = await bundle(['models', 'save', big, '--name', 'big'], { BUNDLE_HOME: join(dir, 'piped') })
    assert.equal(piped.code, 0)
    assert.equal(piped.stderr, '')
    assert.match(piped.stdout, /^big:[0-9a-z]{16}\n$/)
  })
})
