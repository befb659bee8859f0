// npm run bench:batching — the cls model with a binary tensor body [1,3,48,192] at concurrency
// 1, 8, 32: (a) raw onnxruntime in-process, (b) a naive hono server calling session.run per
// request, (c) `bundle serve` quickstart with batching off and on. Plus raw rec-model timings
// per batch size, which is why the batcher must choose its batch size itself.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ort from 'onnxruntime-node'
import { MODELS } from '../test/utils/models.js'
import { runLoad, type LoadResult } from './load.js'
import { fmt, machine, writeSection } from './results.js'
import { startServer, waitReady } from './server.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const QUICKSTART = fileURLToPath(new URL('../examples/quickstart/service.ts', import.meta.url))
const NAIVE = fileURLToPath(new URL('./fixtures/naive-onnx-server.ts', import.meta.url))
const home = mkdtempSync(join(tmpdir(), 'mb-bench-batching-'))
const CONCURRENCY = [1, 8, 32]
const body = new Uint8Array(new Float32Array(3 * 48 * 192).fill(0.25).buffer)

async function raw(model: string, shape: number[], batches: number[], seconds = 2): Promise<Map<number, number>> {
  const session = await ort.InferenceSession.create(model)
  const out = new Map<number, number>()
  for (const n of batches) {
    const x = new ort.Tensor('float32', new Float32Array(n * shape.reduce((a, b) => a * b, 1)).fill(0.25), [
      n,
      ...shape,
    ])
    for (let i = 0; i < 3; i++) await session.run({ x })
    let items = 0
    const t = performance.now()
    while (performance.now() - t < seconds * 1000) {
      await session.run({ x })
      items += n
    }
    out.set(n, items / ((performance.now() - t) / 1000))
  }
  await session.release()
  return out
}

const load = (url: string, concurrency: number): Promise<LoadResult> =>
  runLoad({
    url: `${url}/classifyTensor`,
    headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,192' },
    body,
    concurrency,
    warmupMs: 2000,
    durationMs: 6000,
  })

async function server(label: string, args: string[], env: Record<string, string>): Promise<Map<number, LoadResult>> {
  const s = await startServer(args, env, 'ignore')
  const results = new Map<number, LoadResult>()
  try {
    await waitReady(s.url)
    for (const c of CONCURRENCY) results.set(c, await load(s.url, c))
  } finally {
    s.child.kill('SIGTERM')
    await new Promise((r) => s.child.once('exit', r))
  }
  console.log(label, [...results].map(([c, r]) => `c=${c} ${fmt(r.okRps, 0)} ok/s (${r.errors} errors)`).join(' '))
  return results
}

try {
  const clsRaw = await raw(MODELS.cls, [3, 48, 192], [1, 2, 4, 8, 16, 32])
  const best = [...clsRaw].reduce((a, b) => (b[1] > a[1] ? b : a))
  const naive = await server('naive', ['--import', 'tsx', NAIVE], { MODEL: MODELS.cls })
  const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }
  const off = await server('bundle batching off', [BIN, 'serve', QUICKSTART, '--port', '0'], {
    ...env,
    BUNDLE_RUNNER_OCR_CLS_BATCHING_ENABLED: 'false',
  })
  const on = await server('bundle batching on', [BIN, 'serve', QUICKSTART, '--port', '0'], env)
  const recRaw = await raw(MODELS.rec, [3, 48, 320], [1, 2, 4, 8, 16, 32])

  const row = (name: string, c: number, r: LoadResult) =>
    `| ${name} | ${c} | ${fmt(r.okRps, 0)} | ${fmt(r.rps - r.okRps, 0)} | ${fmt(r.okP50, 1)} | ${fmt(r.okP99, 1)} ` +
    `| ${fmt(r.p99, 1)} |`
  const rows: string[] = []
  for (const c of CONCURRENCY) {
    rows.push(row('(b) naive hono + session.run', c, naive.get(c)!))
    rows.push(row('(c) `bundle serve`, batching off', c, off.get(c)!))
    rows.push(row('(c) `bundle serve`, batching on (maxLatencyMs 50)', c, on.get(c)!))
  }
  const on32 = on.get(32)!.okRps
  writeSection(
    'batching',
    `## Adaptive batching (\`npm run bench:batching\`)\n\n${machine()}. PaddleOCR cls model, binary tensor body ` +
      `[1,3,48,192], closed-loop load generator on the same 2 cores; 2 s warm-up, 6 s window; latencies in ms.\n\n` +
      `(a) raw onnxruntime-node in-process, items/s by batch size: ` +
      `${[...clsRaw].map(([n, v]) => `${n}: ${fmt(v, 0)}`).join(', ')} (best: batch ${best[0]}, ` +
      `${fmt(best[1], 0)}/s; batch 1: ${fmt(clsRaw.get(1)!, 0)}/s).\n\n` +
      `| server | concurrency | successful req/s | shed (503) req/s | p50 (served) | p99 (served) | p99 (all ` +
      `answers) |\n|---|---|---|---|---|---|---|\n${rows.join('\n')}\n\n` +
      `At c=32, in successful requests per second: batching on is ${fmt(on32 / naive.get(32)!.okRps, 2)}× the ` +
      `naive server (target ≥ 2.5×), ${fmt(on32 / off.get(32)!.okRps, 2)}× batching off, and ` +
      `${fmt(on32 / best[1], 2)}× raw onnxruntime at its best batch (target ≥ 0.8×); served p99 ` +
      `${fmt(on.get(32)!.okP99, 1)} ms against a runner bound of 50 ms plus one batch (the runner bound covers ` +
      `queue and execution; HTTP parsing and the event loop come on top). ` +
      `What limits these numbers: on this 2-core machine raw throughput is nearly flat across batch sizes (row ` +
      `(a)), so batching cannot multiply it — the 2.5× target assumes hardware where bigger batches run much ` +
      `faster per row (a GPU, or more cores); 2.5× the naive server would exceed the raw ceiling here. The load ` +
      `generator, the API process and the worker share the same 2 cores, and every server row pays HTTP parsing ` +
      `on them; the naive server also skips the process boundary that keeps onnxruntime's blocking run() off the ` +
      `HTTP event loop.\n\n` +
      `Rec model [N,3,48,320], raw onnxruntime items/s by batch size: ` +
      `${[...recRaw].map(([n, v]) => `${n}: ${fmt(v, 0)}`).join(', ')} — throughput does not keep rising with ` +
      `batch size, so the batcher measures and picks its batch size instead of filling maxBatchSize.`,
  )
} finally {
  rmSync(home, { recursive: true, force: true })
}
