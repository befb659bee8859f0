// test-slot: long (a minute or more: started early, see scripts/test.mjs)
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { basename, join } from 'node:path'
import { describe, it } from 'node:test'
import { ModelStore } from '../../store/index.js'
import { BIN } from '../utils/cli.js'
import { listCases, ortReference, readCase } from '../utils/onnx-corpus.js'
import { listeningUrl } from '../utils/port.js'
import { owned, untilReady } from '../utils/serve.js'
import { difference } from '../utils/tensor-compare.js'
import { tempDir } from '../utils/tmp.js'
import { binaryRequest, httpAnswer, jsonRequest, type PathTensor } from '../utils/v2-paths.js'

// Real ONNX models that nobody here wrote (the ONNX backend test corpus: Debian's
// libonnx-testdata), served as a new user serves them: saved in a store, loaded into
// `bundle serve --models '*' --model-control-mode explicit` with POST .../load, asked over HTTP
// with JSON and with binary data, and compared bit for bit with onnxruntime-node's own answer.
// A fixed sample (every STEP-th case) keeps it short; `npm run bench:conformance` runs all of
// them. .ci/run installs the corpus and sets BUNDLE_REQUIRE_ONNX_CORPUS=1, so CI cannot skip this.

const ROOT = process.env.ONNX_CORPUS ?? '/usr/share/libonnx-testdata/data'
const required = process.env.BUNDLE_REQUIRE_ONNX_CORPUS === '1'
const STEP = 8

describe('real ONNX models served exactly (corpus sample)', { skip: !existsSync(ROOT) && !required }, () => {
  it('every sampled model onnxruntime-node runs correctly is loaded and answered exactly like it', {
    timeout: 280_000,
  }, async () => {
    assert.ok(existsSync(ROOT), `the corpus is required here: apt-get install libonnx-testdata (or ONNX_CORPUS=DIR)`)
    const home = join(tempDir(), 'home')
    const store = ModelStore.open({ home })
    const cases: { name: string; id: string; inputs: PathTensor[]; outputs: PathTensor[] }[] = []
    const names = new Set<string>()
    let batchable = 0
    try {
      const dirs = listCases(ROOT)
      for (const dir of dirs.filter((_, i) => i % STEP === 0)) {
        let c: ReturnType<typeof readCase>
        try {
          c = readCase(ROOT, dir)
        } catch {
          continue // a case this reader cannot decode
        }
        if (c === undefined) continue // no data set to compare with
        // Only what onnxruntime-node itself answers correctly is a fair reference.
        const outputs = await ortReference(c)
        if (outputs === undefined) continue
        let name = basename(dir)
        if (names.has(name)) name = `${c.id.split('/')[0]}-${name}`
        names.add(name)
        await store.save({ name, version: '1', paths: [c.model] })
        cases.push({ name, id: c.id, inputs: c.inputs as PathTensor[], outputs })
      }
    } finally {
      store.close()
    }
    assert.ok(cases.length >= 80, `the sample holds enough models to mean something (${cases.length})`)

    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--models', '*', '--model-control-mode', 'explicit', '--port', '0', '--no-access-log'],
      { env: { ...process.env, BUNDLE_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const stop = owned(child, undefined)
    try {
      const url = await listeningUrl(child, () => {})
      await untilReady(url, 120_000)
      const post = async (path: string, body: string | Buffer, headers: Record<string, string> = {}) => {
        const r = await fetch(`${url}${path}`, { method: 'POST', body, headers })
        return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) }
      }
      const failures: string[] = []
      for (const c of cases) {
        const load = await post(`/v2/repository/models/${c.name}/load`, '')
        if (load.status !== 200) {
          failures.push(`${c.id}: load ${load.status} ${load.body.toString().slice(0, 200)}`)
          continue
        }
        const config = (await (await fetch(`${url}/v2/models/${c.name}/config`)).json()) as { max_batch_size: number }
        if (config.max_batch_size > 0) batchable++
        const bin = binaryRequest(c.inputs)
        for (const [path, body, headers] of [
          ['JSON', jsonRequest(c.inputs), { 'content-type': 'application/json' }],
          ['binary', bin.body, bin.headers],
        ] as const) {
          const res = await post(`/v2/models/${c.name}/infer`, body, headers)
          if (res.status !== 200) {
            failures.push(`${c.id} (${path}): ${res.status} ${res.body.toString().slice(0, 200)}`)
            continue
          }
          const got = httpAnswer(res.body, res.headers.get('inference-header-content-length'))
          for (const e of c.outputs) {
            const g = got.find((o) => o.name === e.name)
            const d = g === undefined ? 'missing' : difference(g as never, e as never)
            if (d) failures.push(`${c.id} (${path}), output ${e.name}: ${d}`)
          }
        }
        const unload = await post(`/v2/repository/models/${c.name}/unload`, '')
        assert.equal(unload.status, 200, `unload ${c.name}`)
      }
      assert.deepEqual(failures, [], `${failures.length} of ${cases.length} sampled models not served exactly`)
      // Most of the corpus has fixed first dimensions: it must be served unbatched, not refused.
      assert.ok(batchable < cases.length, `some sampled models run as given (max_batch_size 0)`)
    } finally {
      await stop('SIGTERM')
    }
  })
})
