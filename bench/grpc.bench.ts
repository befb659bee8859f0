// npm run bench:grpc — the Open Inference Protocol over gRPC (ModelInfer, raw_input_contents)
// against its HTTP binary form (/v2 infer with binary tensor data), same server, same model
// (the quickstart's ocr-cls), a [8,3,48,192] FP32 input of random values. The load comes from
// `bundle bench` in a process of its own; the two protocols run interleaved, round by round,
// and each row is the median round.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from '../test/utils/port.js'
import { fmt, machine, median, writeSection } from './results.js'
import { startServer, waitReady } from './server.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart/service.ts', import.meta.url))
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONCURRENCY = [1, 4, 16]

interface Row {
  stats: { goodput: number; p50: number; p99: number; errors: number; refused: number }
  server: { batch: number }[]
}

function bench(url: string, model: string, c: number): Promise<Row> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [BIN, 'bench', url, '--model', model, '--shape', '8,3,48,192', '--concurrency', String(c)].concat([
        '--warmup',
        '1000',
        '--window',
        '2000',
        '--max-windows',
        '5',
        '-o',
        'json',
      ]),
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('close', (code) =>
      code === 0 ? resolve((JSON.parse(out) as Row[])[0]!) : reject(new Error(`bench exited ${code}`)),
    )
  })
}

const dir = mkdtempSync(join(tmpdir(), 'mb-bench-grpc-'))
const grpcPort = await freePort()
const server = await startServer([BIN, 'serve', QUICKSTART, '--port', '0'], {
  BUNDLE_HOME: join(dir, 'home'),
  GRPC_PORT: String(grpcPort),
  BUNDLE_ACCESS_LOG: '0',
})
try {
  await waitReady(server.url)
  const lines = [
    '| clients | gRPC goodput/s | HTTP /v2 goodput/s | gRPC ÷ HTTP | gRPC p50 / p99 ms | HTTP p50 / p99 ms |',
    '|---:|---:|---:|---:|---:|---:|',
  ]
  for (const c of CONCURRENCY) {
    const g: Row[] = []
    const h: Row[] = []
    for (let r = 0; r < ROUNDS; r++) {
      g.push(await bench(`grpc://127.0.0.1:${grpcPort}`, 'ocr-cls', c))
      h.push(await bench(server.url, 'ocr-cls', c))
    }
    const m = (rows: Row[], k: 'goodput' | 'p50' | 'p99') => median(rows.map((x) => x.stats[k]))
    const line =
      `| ${c} | ${fmt(m(g, 'goodput'))} | ${fmt(m(h, 'goodput'))} | ${fmt(m(g, 'goodput') / m(h, 'goodput'), 2)}× | ` +
      `${fmt(m(g, 'p50'), 1)} / ${fmt(m(g, 'p99'), 1)} | ${fmt(m(h, 'p50'), 1)} / ${fmt(m(h, 'p99'), 1)} |`
    console.log(line)
    lines.push(line)
  }
  writeSection(
    'grpc',
    `## Open Inference Protocol: gRPC ModelInfer vs HTTP /v2 binary\n\n${machine()}. One quickstart server, ocr-cls, ` +
      `[8,3,48,192] FP32 per request (1.2 MB); load from \`bundle bench\` (its own process), closed loop, median of ` +
      `${ROUNDS} interleaved rounds. Goodput in requests (of 8 rows) per second.\n\n${lines.join('\n')}`,
  )
} finally {
  server.child.kill('SIGTERM')
  await new Promise((r) => server.child.once('exit', r))
  rmSync(dir, { recursive: true, force: true })
}
