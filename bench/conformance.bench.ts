// npm run bench:conformance — a broad corpus of real ONNX models that nobody here wrote, served as
// a new user serves them: the ONNX backend test corpus (operators, small networks; Debian's
// libonnx-testdata, or ONNX_CORPUS=DIR in the same layout), each model saved in a fresh store,
// loaded into a running `bundle serve --models '*' --model-control-mode explicit` through
// POST /v2/repository/models/NAME/load, asked over HTTP with JSON data and with binary data, and
// compared element for element with what onnxruntime-node answers itself; then unloaded. The
// measure is the share of the models onnxruntime-node runs correctly (its answer within the
// corpus's tolerance of the expected output) that the server answers exactly like it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ModelStore } from '../store/index.js'
import { type CorpusCase, listCases, ortReference, readCase } from '../test/utils/onnx-corpus.js'
import { difference } from '../test/utils/tensor-compare.js'
import { binaryRequest, httpAnswer, jsonRequest, type PathTensor } from '../test/utils/v2-paths.js'
import { machine, writeSection } from './results.js'
import { startServer } from './server.js'

const ROOT = process.env.ONNX_CORPUS ?? '/usr/share/libonnx-testdata/data'
const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
if (!existsSync(ROOT)) {
  console.error(`no corpus at ${ROOT}: apt-get install libonnx-testdata, or set ONNX_CORPUS=DIR`)
  process.exit(1)
}

interface Reference {
  c: CorpusCase
  name: string
  outputs: PathTensor[]
}

/** The cases onnxruntime-node runs correctly, with its own answers (the reference the server must equal). */
async function references(): Promise<{ refs: Reference[]; total: number; notRun: number }> {
  const refs: Reference[] = []
  const names = new Set<string>()
  let total = 0
  for (const dir of listCases(ROOT)) {
    total++
    const c = (() => {
      try {
        return readCase(ROOT, dir)
      } catch {
        return undefined
      }
    })()
    if (c === undefined) continue
    const outputs = await ortReference(c)
    if (outputs === undefined) continue
    // Model names as a user would give them: the case's directory name (unique per corpus).
    let name = basename(dir)
    if (names.has(name)) name = `${c.id.split('/')[0]}-${name}`
    names.add(name)
    refs.push({ c, name, outputs })
  }
  return { refs, total, notRun: total - refs.length }
}

const { refs, total } = await references()
console.log(`${total} cases; onnxruntime-node runs ${refs.length} correctly`)
const home = mkdtempSync(join(tmpdir(), 'mb-conformance-'))
const store = ModelStore.open({ home })
for (const r of refs) await store.save({ name: r.name, version: '1', paths: [r.c.model] })
store.close()

const server = await startServer(
  [BIN, 'serve', '--models', '*', '--model-control-mode', 'explicit', '--port', '0', '--no-access-log'],
  { BUNDLE_HOME: home },
  'ignore',
)
const post = async (path: string, body: string | Buffer, headers: Record<string, string> = {}) => {
  const r = await fetch(`${server.url}${path}`, { method: 'POST', body, headers })
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) }
}

/** Why the server's answers differ from onnxruntime-node's for one model (undefined: they do not). */
async function serve(r: Reference): Promise<string | undefined> {
  const load = await post(`/v2/repository/models/${r.name}/load`, '')
  if (load.status !== 200) return `load ${load.status}: ${load.body.toString().slice(0, 300)}`
  try {
    const inputs = r.c.inputs as PathTensor[]
    const bin = binaryRequest(inputs)
    for (const [path, body, headers] of [
      ['JSON', jsonRequest(inputs), { 'content-type': 'application/json' }],
      ['binary', bin.body, bin.headers],
    ] as const) {
      const res = await post(`/v2/models/${r.name}/infer`, body, headers)
      if (res.status !== 200) return `${path} ${res.status}: ${res.body.toString().slice(0, 300)}`
      const got = httpAnswer(res.body, res.headers.get('inference-header-content-length'))
      for (const e of r.outputs) {
        const g = got.find((o) => o.name === e.name)
        const d = g === undefined ? 'missing' : difference(g as never, e as never)
        if (d) return `${path}, output ${e.name}: ${d}`
      }
    }
    return undefined
  } finally {
    await post(`/v2/repository/models/${r.name}/unload`, '')
  }
}

const started = performance.now()
const failures: string[] = []
const queue = [...refs]
await Promise.all(
  [0, 1].map(async () => {
    for (let r = queue.shift(); r !== undefined; r = queue.shift()) {
      const why = await serve(r).catch((err: unknown) => `request failed: ${(err as Error).message}`)
      if (why) failures.push(`${r.c.id}: ${why}`)
    }
  }),
)
const seconds = (performance.now() - started) / 1000
server.child.kill('SIGTERM')
rmSync(home, { recursive: true, force: true })

const served = refs.length - failures.length
const share = (100 * served) / refs.length
console.log(`served exactly: ${served} of ${refs.length} (${share.toFixed(1)}%) in ${seconds.toFixed(0)} s`)
for (const f of failures) console.log(`  ${f}`)
writeSection(
  'conformance',
  `## Conformance: real ONNX models served exactly (bench:conformance)

${machine()}. Corpus: ${ROOT} (${total} cases). onnxruntime-node runs ${refs.length} of them correctly (its
answer within the corpus's tolerance: rtol 1e-3, atol 1e-7). Each was saved in a fresh store, loaded into
\`bundle serve --models '*' --model-control-mode explicit\` with POST /v2/repository/models/NAME/load
(default settings), asked over HTTP with JSON data and with binary data, compared element for element
with onnxruntime-node's own answer (exact: bit for bit, NaN and -0 included), then unloaded.

| served exactly | of | share | time |
|---|---|---|---|
| ${served} | ${refs.length} | ${share.toFixed(1)}% | ${seconds.toFixed(0)} s |
${failures.length ? `\nNot served exactly:\n\n${failures.map((f) => `- ${f.replace(/\n/g, ' ')}`).join('\n')}\n` : ''}`,
)
process.exit(0)
