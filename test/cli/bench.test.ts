import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { bundle } from '../utils/cli.js'
import { serveReady, type Served } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// bundle bench against a real server (the quickstart, HTTP and gRPC), as a user runs it: a
// service API with a file, a model over /v2 and over gRPC with random tensors, JSON, CSV and the
// plot, and the mistakes a user makes answered with what to do. Short windows: this checks
// behaviour, not speed (bench/ measures speed).

const PNG = join(import.meta.dirname, '..', 'fixtures', 'images', 'hello-180.png')
const QUICK = ['--warmup', '200', '--window', '300', '--max-windows', '3']

describe('bundle bench', () => {
  let server: Served
  let grpcUrl: string

  before(async () => {
    server = await serveReady('examples/quickstart/service.ts', [], { GRPC_PORT: '0' })
    grpcUrl = server.grpcUrl!
    assert.ok(grpcUrl, server.output())
  })
  after(() => server?.stop('SIGTERM'))

  it('a service API with a file: a row per step with goodput, percentiles and the server-side split', {
    timeout: 120_000,
  }, async () => {
    const r = await bundle([
      'bench',
      server.url,
      '--api',
      '/classify',
      '--input',
      PNG,
      '--concurrency',
      '1:4:x2',
      ...QUICK,
      '-o',
      'json',
    ])
    assert.equal(r.code, 0, r.stderr)
    const rows = JSON.parse(r.stdout)
    assert.deepEqual(
      rows.map((x: any) => x.load),
      [1, 2, 4].map((value) => ({ mode: 'concurrency', value })),
    )
    for (const row of rows) {
      assert.ok(row.stats.goodput > 0 && row.stats.errors === 0, JSON.stringify(row.stats))
      assert.ok(row.stats.p50 > 0 && row.stats.p50 <= row.stats.p90 && row.stats.p90 <= row.stats.p99)
      assert.equal(typeof row.stable, 'boolean')
      assert.ok(row.windows >= 3 && row.windows <= 3)
      const cls = row.server.find((s: any) => s.model === 'ocr-cls:2.0.0')
      assert.ok(cls && cls.batch >= 1 && cls.computeMs > 0, JSON.stringify(row.server))
    }
    assert.match(r.stderr, /c=4: window 3\/3 +[\d.]+\/s +p99 [\d.]+ ms/, 'progress per window on stderr')
  })

  it('a model over gRPC and over /v2 with random tensors; CSV; the plot', { timeout: 120_000 }, async () => {
    const plot = join(tempDir(), 'sweep.html')
    const g = await bundle([
      'bench',
      grpcUrl,
      '--model',
      'ocr-cls',
      '--shape',
      '8,3,48,192',
      '--concurrency',
      '2',
      ...QUICK,
      '-o',
      'csv',
      '--plot',
      plot,
    ])
    assert.equal(g.code, 0, g.stderr)
    const [head, line] = g.stdout.trim().split('\n')
    assert.equal(
      head,
      'concurrency,goodput/s,refused/s,errors,p50 ms,p90 ms,p95 ms,p99 ms,batch,queue ms,compute ms,stable',
    )
    const cells = line!.split(',')
    assert.equal(cells[0], '2')
    assert.ok(Number(cells[1]) > 0)
    assert.ok(Number(cells[8]) >= 8, 'each request carries 8 rows, so a batch holds 8 or more')
    const html = readFileSync(plot, 'utf8')
    assert.match(html, /<svg[^>]*>[\s\S]*goodput[\s\S]*p99 latency[\s\S]*<circle/)
    const v2 = await bundle([
      'bench',
      server.url,
      '--model',
      'ocr-cls',
      '--shape',
      '1,3,48,192',
      '--rate',
      '30',
      ...QUICK,
    ])
    assert.equal(v2.code, 0, v2.stderr)
    assert.match(v2.stdout, /^rate\/s +goodput\/s/)
    assert.match(v2.stdout, /\n +30 +(2[4-9]|3[0-6])\.\d/, 'about the 30/s asked for')
  })

  it('mistakes get a coded error that says what to do, and no table', { timeout: 60_000 }, async () => {
    const cases: [string[], number, RegExp][] = [
      [[server.url], 2, /--api ROUTE .* or --model NAME/],
      [[server.url, '--api', '/classify'], 2, /--input FILE\|DIR, or --shape/],
      [[server.url, '--model', 'ocr-cls'], 2, /input "x" has the shape \[-1,3,-1,-1\].*--shape/],
      [[server.url, '--model', 'nope', '--shape', '1'], 2, /model "nope" is not served/],
      [[server.url, '--model', 'ocr-cls', '--shape', '1,3,48,192', '--concurrency', '0:4'], 2, /START:END/],
      [[server.url, '--api', '/classify', '--input', '/no/such.png'], 2, /no such file/],
      // A route it does not serve is the same mistake as a model it does not serve: one exit code.
      [
        [server.url, '--api', '/nope', '--input', PNG],
        2,
        /route "\/nope" is not served at .*its APIs: \/classify, \/classifyTensor/,
      ],
      [['http://127.0.0.1:1', '--api', '/classify', '--input', PNG], 1, /E_SERVER_UNREACHABLE: cannot reach/],
      [['ftp://x', '--model', 'm'], 2, /scheme must be http, https or grpc/],
    ]
    for (const [args, code, message] of cases) {
      const r = await bundle(['bench', ...args, ...QUICK])
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`)
      assert.match(r.stderr, message, args.join(' '))
      assert.equal(r.stdout, '')
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace')
    }
  })
})
