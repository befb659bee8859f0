import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { modelFilter, selectModels } from '../../cli/serve-models.js'
import { ModelStore } from '../../store/index.js'
import { BIN, bundle } from '../utils/cli.js'
import { grpcError, inferenceClient } from '../utils/grpc.js'
import { encodeModel, node } from '../utils/onnx-graph.js'
import { listeningUrl } from '../utils/port.js'
import { untilReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// `bundle serve --models`: a store served without writing a service, as `tritonserver
// --model-repository` serves a directory — the real CLI, real worker processes, real sockets.

const summary = (name: string, version: string, framework = 'onnx') =>
  ({ name, version, framework }) as Parameters<typeof selectModels>[1][number]

describe('choosing the models (--models)', () => {
  const stored = [
    summary('ocr-cls', '1.0.0'),
    summary('ocr-cls', '2.1.0'),
    summary('ocr-det', '1.2.0'),
    summary('vad', '20260101'),
    summary('tokenizer', '1', 'custom'),
  ]

  it('takes names, globs, NAME:VERSION and NAME@RANGE; "*" is every ONNX model', () => {
    assert.deepEqual(selectModels('*', stored), [
      { name: 'ocr-cls', tag: 'ocr-cls' },
      { name: 'ocr-det', tag: 'ocr-det' },
      { name: 'vad', tag: 'vad' },
    ])
    assert.deepEqual(selectModels('ocr-*@^2', stored), [{ name: 'ocr-cls', tag: 'ocr-cls@^2' }])
    assert.deepEqual(selectModels(' vad , ocr-cls:1.0.0', stored), [
      { name: 'vad', tag: 'vad' },
      { name: 'ocr-cls', tag: 'ocr-cls:1.0.0' },
    ])
    assert.deepEqual(selectModels('*', []), [], 'an empty store: nothing to load yet')
    const f = modelFilter('ocr-*@^2,vad')
    assert.deepEqual(['ocr-cls', 'ocr-x', 'vad', 'vads', 'det'].map(f), [true, true, true, false, false])
  })

  it('refuses a pattern that matches nothing, naming what the store has', () => {
    const usage = (patterns: string, re: RegExp) =>
      assert.throws(
        () => selectModels(patterns, stored),
        (e: { code?: string; message: string }) => e.code === 'E_CLI_USAGE' && re.test(e.message),
      )
    usage('nope', /"nope" matches no ONNX model in the store \(it has ocr-cls, ocr-det, vad\)/)
    usage('tokenizer', /matches no ONNX model/)
    usage('ocr-cls@^3', /the store has ocr-cls, but no version of it is \^3/)
    usage('ocr-cls@bad range', /not a semver range/)
    usage(' , ', /needs a model name/)
  })
})

describe('bundle serve --models', () => {
  const home = join(tempDir(), 'home')
  const dir = tempDir()
  const env = { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' }

  const saveModels = async () => {
    const store = ModelStore.open({ home })
    const identity = (name: string, dims: (number | string)[]) => {
      const file = join(dir, `${name}.onnx`)
      writeFileSync(
        file,
        encodeModel({
          nodes: [node('Neg', ['x'], ['y'])],
          inputs: [{ name: 'x', dtype: 'float32', dims }],
          outputs: [{ name: 'y', dtype: 'float32', dims }],
        }),
      )
      return file
    }
    await store.save({ name: 'neg_a', version: '1', paths: [identity('neg_a', ['batch', 2])] })
    await store.save({ name: 'neg_b', version: '1', paths: [identity('neg_b', [3, 2])] })
    await store.save({ name: 'other', version: '1', paths: [identity('other', [2])] })
    store.close()
  }

  const start = (args: string[]) => {
    const child = spawn(process.execPath, [BIN, 'serve', ...args, '--port', '0'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stderr.on('data', (c) => (out += c))
    const exited = new Promise((r) => child.on('exit', r))
    return { child, logs: () => out, stop: async () => (child.kill('SIGTERM'), await exited) }
  }

  it('serves the models the patterns name over /v2 HTTP and gRPC; one that fails to load leaves the others serving', {
    timeout: 180_000,
  }, async () => {
    await saveModels()
    // neg_b is [3,2]: a maxBatchSize contradicts it, so its load fails; neg_a batches.
    const config = join(dir, 'serve.yaml')
    writeFileSync(config, 'runners:\n  neg_b:\n    batching:\n      maxBatchSize: 4\n')
    let stdout = ''
    const s = start(['--models', 'neg_*', '--grpc-port', '0', '-c', config])
    try {
      const url = await listeningUrl(s.child, (c) => (stdout += c))
      await untilReady(url, 120_000)
      const index = (await (await fetch(`${url}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string
        state: string
        reason?: string
      }[]
      assert.deepEqual(
        index.map((m) => `${m.name} ${m.state}`),
        ['neg_a READY', 'neg_b UNAVAILABLE'],
        'the index lists what --models names',
      )
      assert.match(index[1]!.reason!, /failed to load.*maxBatchSize 4.*input "x" has shape \[3,2\]/)
      assert.match(stdout, /"msg":"failed to load 'neg_b': .*maxBatchSize 4/)
      assert.match(stdout, /"msg":"loaded 1 of 2 models"/)
      const r = await fetch(`${url}/v2/models/neg_a/infer`, {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2], data: [1, 2, 3, 4] }] }),
      })
      assert.equal(r.status, 200)
      assert.deepEqual(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data, [-1, -2, -3, -4])
      // gRPC, with Triton's answers for a model not loaded and one that is not served here.
      const grpcUrl = /"grpc":"grpc:\/\/([^"]+)"/.exec(stdout)?.[1] ?? /grpc:\/\/[\d.:]+/.exec(stdout)?.[0]
      assert.ok(grpcUrl, `the gRPC address is logged: ${stdout.slice(0, 2000)}`)
      const grpc = inferenceClient(grpcUrl)
      try {
        assert.deepEqual(await grpc.call('ModelReady', { name: 'neg_a' }), { ready: true })
        assert.deepEqual(await grpc.call('ModelReady', { name: 'neg_b' }), { ready: false })
        await grpcError(grpc.call('ModelReady', { name: 'other' }), 5)
      } finally {
        grpc.close()
      }
      // Only what the patterns name can be loaded.
      const other = await fetch(`${url}/v2/repository/models/other/load`, { method: 'POST' })
      assert.equal(other.status, 404)
      assert.match(await other.text(), /failed to load 'other': .*--models names, and other is not one of them/)
    } finally {
      await s.stop()
    }
  })

  it('explicit control mode loads nothing until asked; usage mistakes stop before a port is opened', {
    timeout: 120_000,
  }, async () => {
    const s = start(['--models', '*', '--model-control-mode', 'explicit'])
    try {
      const url = await listeningUrl(s.child)
      await untilReady(url, 60_000)
      const states = (await (await fetch(`${url}/v2/repository/index`, { method: 'POST' })).json()) as {
        state: string
      }[]
      assert.ok(states.length === 3 && states.every((m) => m.state === 'UNAVAILABLE'))
      assert.equal((await fetch(`${url}/v2/repository/models/other/load`, { method: 'POST' })).status, 200)
      assert.equal((await fetch(`${url}/v2/models/other/ready`)).status, 200)
    } finally {
      await s.stop()
    }
    const none = await bundle(['serve', '--models', 'nothing_here', '--port', '0'], env)
    assert.equal(none.code, 2)
    assert.match(none.stderr, /E_CLI_USAGE: --models "nothing_here" matches no ONNX model in the store/)
    assert.doesNotMatch(none.stdout, /listening/)
    const nothing = await bundle(['serve', '--port', '0'], env)
    assert.equal(nothing.code, 2)
    assert.match(nothing.stderr, /bundle serve needs what to serve/)
    const mode = await bundle(['serve', '--models', '*', '--model-control-mode', 'poll'], env)
    assert.equal(mode.code, 2)
    assert.match(mode.stderr, /--model-control-mode must be none or explicit/)
  })
})
