// npm run bench:overload — open-loop load at 0.5×, 1×, 2×, 3× and 5× of what one worker can
// serve (the PaddleOCR rec model, one onnxruntime thread, batches of up to 2 rows, a 500 ms
// bound; test/fixtures/rec-service.ts). Open loop: requests start on schedule whatever the server
// does, as independent users would send them; every request is counted. What should hold:
// goodput stays near capacity however much is offered, accepted requests stay under the bound,
// and the rest are refused at once instead of queueing until they time out.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ModelStore } from '../store/index.js'
import { MODELS } from '../test/utils/models.js'
import { openLoop, percentile } from '../test/utils/open-loop.js'
import { rssMiB } from '../test/utils/procs.js'
import { runLoad } from './load.js'
import { fmt, machine, writeSection } from './results.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const SERVICE = fileURLToPath(new URL('../test/fixtures/rec-service.ts', import.meta.url))
const BOUND_MS = 500
const FACTORS = [0.5, 1, 2, 3, 5]
const SECONDS = 10
const home = mkdtempSync(join(tmpdir(), 'mb-bench-overload-'))
const body = new Uint8Array(new Float32Array(3 * 48 * 320).fill(0.5).buffer)
const headers = { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,320' }

const store = ModelStore.open({ home })
await store.save({ name: 'ocr-rec', version: '4.0.0', paths: [MODELS.rec] })
store.close()
const port = 30000 + Math.floor(Math.random() * 20000)
const child = spawn(process.execPath, [BIN, 'serve', SERVICE, '--port', String(port)], {
  env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' },
  stdio: 'ignore',
})
const url = `http://127.0.0.1:${port}`
try {
  for (let i = 0; (await fetch(`${url}/readyz`).catch(() => undefined))?.status !== 200; i++) {
    if (i > 600) throw new Error('the server never became ready')
    await new Promise((r) => setTimeout(r, 100))
  }
  // Capacity: a closed loop of 8 clients (each waits for its answer) after a warm-up.
  const capacity = (
    await runLoad({ url: `${url}/read`, headers, body, concurrency: 8, warmupMs: 2000, durationMs: 5000 })
  ).okRps
  const rows: string[] = []
  for (const factor of FACTORS) {
    const rate = factor * capacity
    const rssBefore = rssMiB(child.pid!)
    const { sent, answers } = await openLoop({
      url: `${url}/read`,
      headers,
      body,
      rate,
      durationMs: SECONDS * 1000,
      timeoutMs: 15_000,
    })
    const ok = answers.filter((a) => a.status === 200).map((a) => a.ms)
    const shed = answers.filter((a) => a.status === 503 || a.status === 429).map((a) => a.ms)
    const other = answers.length - ok.length - shed.length
    const line =
      `| ${factor}× | ${fmt(rate, 0)} | ${fmt(ok.length / SECONDS, 1)} ` +
      `(${fmt((100 * ok.length) / sent, 0)}%) | ${fmt(percentile(ok, 50), 0)} | ${fmt(percentile(ok, 99), 0)} | ` +
      `${ok.filter((ms) => ms > BOUND_MS).length} | ` +
      `${shed.length ? `${fmt(percentile(shed, 50), 0)} / ${fmt(percentile(shed, 99), 0)}` : '—'} | ${other} | ` +
      `${fmt(rssMiB(child.pid!) - rssBefore, 0)} |`
    console.log(line)
    rows.push(line)
    await new Promise((r) => setTimeout(r, 1000)) // let the queue empty between steps
  }
  writeSection(
    'overload',
    `## Overload (\`npm run bench:overload\`)\n\n${machine()}. \`bundle serve test/fixtures/rec-service.ts\`: the ` +
      `PaddleOCR rec model in one worker (one onnxruntime thread), batches of up to 2 rows, \`maxLatencyMs\` ` +
      `${BOUND_MS}; one row [1,3,48,320] per request. Capacity measured first with 8 closed-loop clients: ` +
      `${fmt(capacity, 1)} req/s. Then open-loop load (requests start on schedule whatever the server does) at ` +
      `multiples of it, ${SECONDS} s each; latencies in ms as the client measures them.\n\n| offered | req/s | ` +
      `served req/s (share of sent) | served p50 | served p99 | served over ${BOUND_MS} ms | shed p50 / p99 | ` +
      `errors or hung | server RSS change MiB |\n|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n\nPast ` +
      `capacity the server keeps serving about what it can and refuses the rest with 503 \`E_RUNNER_OVERLOADED\` ` +
      `(and \`Retry-After\`): most refusals come on arrival, a few just before their deadline when a request ` +
      `admitted on the optimistic estimate can no longer make it. The load generator, the API process and the ` +
      `worker share the machine's cores.`,
  )
} finally {
  child.kill('SIGTERM')
  await new Promise((r) => child.once('exit', r))
  rmSync(home, { recursive: true, force: true })
}
