import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { BIN, bundle, type Listed } from '../utils/cli.js'
import { freePort } from '../utils/port.js'
import { serveReady, untilReady } from '../utils/serve.js'
import { quickstartCopy, tempDir } from '../utils/tmp.js'

// What bundle.yaml adds to a build: model aliases, ensembles, Docker settings.

describe('model aliases', () => {
  it('a runner may name its model by the alias bundle.yaml gives it; the bundle pins and serves it', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const src = quickstartCopy()
    writeFileSync(
      join(src, 'service.ts'),
      readFileSync(join(src, 'service.ts'), 'utf8').replace("onnxRunner('ocr-cls:latest'", "onnxRunner('cls'"),
    )
    writeFileSync(
      join(src, 'bundle.yaml'),
      readFileSync(join(src, 'bundle.yaml'), 'utf8').replace(
        '  - tag: ocr-cls:2.0.0\n',
        '  - tag: ocr-cls:2.0.0\n    alias: cls\n',
      ),
    )
    const built = await bundle(['build', src, '--version', '1.0.0', '-o', 'json'], { BUNDLE_HOME: home })
    assert.equal(built.code, 0, built.stderr)
    assert.deepEqual((JSON.parse(built.stdout) as Listed).models, [
      {
        tag: 'ocr-cls:2.0.0',
        digest: (JSON.parse(built.stdout) as Listed).models[0]!.digest,
        alias: 'cls',
        requested: ['cls'],
      },
    ])
    const port = await freePort()
    const child = spawn(process.execPath, [BIN, 'serve', 'quickstart:1.0.0', '--port', String(port)], {
      env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' },
      stdio: 'ignore',
    })
    const exited = new Promise((r) => child.on('exit', r))
    try {
      await untilReady(`http://127.0.0.1:${port}`, 30_000)
      const png = readFileSync(new URL('../fixtures/images/hello-180.png', import.meta.url))
      const r = await fetch(`http://127.0.0.1:${port}/classify`, {
        method: 'POST',
        headers: { 'content-type': 'image/png' },
        body: png,
      })
      assert.equal(((await r.json()) as { angle: number }).angle, 180)
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })
})

describe('ensembles in bundle.yaml', () => {
  it('are checked at build against the pinned models, pinned in the manifest, and served as /v2 models from the ' +
    'bundle and from source alike', {
    timeout: 240_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const src = quickstartCopy()
    const yaml = readFileSync(join(src, 'bundle.yaml'), 'utf8')
    const withEnsemble = (steps: string) =>
      writeFileSync(join(src, 'bundle.yaml'), `${yaml}ensembles:\n  direction:\n    steps:\n${steps}`)
    const refused = async (re: RegExp) => {
      const r = await bundle(['build', src], { BUNDLE_HOME: home })
      assert.equal(r.code, 2, r.stderr)
      assert.match(r.stderr, re)
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace')
      assert.equal(
        JSON.parse((await bundle(['list', '-o', 'json'], { BUNDLE_HOME: home })).stdout).length,
        0,
        'nothing stored',
      )
    }
    withEnsemble('      - model: ocr-det\n        inputMap: { x: image }\n        outputMap: { y: probs }\n')
    await refused(
      /ensembles\.direction\.steps\.0\.model: "ocr-det" is not an onnx runner of the service \(runners: ocr-cls\)/,
    )
    withEnsemble(
      '      - model: ocr-cls\n        inputMap: { x: a }\n        outputMap: { softmax_0.tmp_0: b }\n      - ' +
        'model: ocr-cls\n        inputMap: { x: b }\n        outputMap: { softmax_0.tmp_0: a }\n',
    )
    await refused(
      new RegExp(
        /E_BUNDLE_CONFIG_INVALID: .*ensembles\.direction: ensemble "direction": every tensor a step/.source +
          / consumes is produced by another step/.source,
      ),
    )
    // Tensors the pinned model does not have: named with the model's real inputs and outputs.
    withEnsemble(
      '      - model: ocr-cls\n        inputMap: { image: image }\n        outputMap: { softmax_0.tmp_0: probs }\n',
    )
    await refused(
      new RegExp(
        /^error E_BUNDLE_CONFIG_INVALID: \S+bundle\.yaml: ensembles\.direction: ensemble "direction":/.source +
          / step 1: ocr-cls has no input "image" \(inputs: "x"\)$/.source,
        'm',
      ),
    )
    withEnsemble('      - model: ocr-cls\n        inputMap: { x: image }\n        outputMap: { probs: probs }\n')
    await refused(
      new RegExp(
        /bundle\.yaml: ensembles\.direction: ensemble "direction": step 1: ocr-cls has no output "probs"/.source +
          / \(outputs: "softmax_0\.tmp_0"\)/.source,
      ),
    )
    withEnsemble(
      '      - model: ocr-cls\n        version: 3.0.0\n        inputMap: { x: image }\n        outputMap: { ' +
        'softmax_0.tmp_0: probs }\n',
    )
    await refused(/ensembles\.direction\.steps\.0\.version: "3\.0\.0", but runner ocr-cls serves ocr-cls:2\.0\.0/)

    withEnsemble(
      '      - model: ocr-cls\n        inputMap: { x: image }\n        outputMap: { softmax_0.tmp_0: probs }\n',
    )
    const built = await bundle(['build', src, '--version', '1.0.0', '-o', 'json'], { BUNDLE_HOME: home })
    assert.equal(built.code, 0, built.stderr)
    const data = Array.from({ length: 3 * 48 * 192 }, (_, i) => ((i * 37) % 255) / 127.5 - 1)
    const infer = async (url: string, model: string, input: string) => {
      const r = await fetch(`${url}/v2/models/${model}/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [{ name: input, shape: [1, 3, 48, 192], datatype: 'FP32', data }] }),
      })
      assert.equal(r.status, 200)
      return ((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data
    }
    const answers: number[][] = []
    // The built bundle, then the project directory and its service file served from source.
    for (const entry of ['quickstart:1.0.0', src, join(src, 'service.ts')]) {
      const s = await serveReady(entry, [], { BUNDLE_HOME: home })
      try {
        const meta = (await (await fetch(`${s.url}/v2/models/direction`)).json()) as {
          platform: string
          inputs: { name: string; shape: number[] }[]
        }
        assert.equal(meta.platform, 'ensemble', entry)
        assert.deepEqual(
          meta.inputs.map((i) => [i.name, i.shape]),
          [['image', [-1, 3, -1, -1]]],
        )
        const out = await infer(s.url, 'direction', 'image')
        // The ensemble's one step is the model itself: the same probabilities.
        assert.deepEqual(out, await infer(s.url, 'ocr-cls', 'x'))
        answers.push(out)
      } finally {
        await s.stop('SIGTERM')
      }
    }
    assert.deepEqual(answers[1], answers[0], 'from source, the same answer as from the bundle')
    assert.deepEqual(answers[2], answers[0])
  })
})

describe('the generated Dockerfile', () => {
  it('follows bundle.yaml docker settings: CUDA base with its own node binary, system packages, env', {
    timeout: 120_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const src = quickstartCopy()
    writeFileSync(
      join(src, 'bundle.yaml'),
      readFileSync(join(src, 'bundle.yaml'), 'utf8') +
        'env: { LOG_FORMAT: json }\ndocker: { gpu: true, systemPackages: [libgomp1] }\n',
    )
    assert.equal((await bundle(['build', src, '--version', '1.0.0'], { BUNDLE_HOME: home })).code, 0)
    const gpu = (await bundle(['containerize', 'quickstart:1.0.0', '--print-dockerfile'], { BUNDLE_HOME: home })).stdout
    assert.match(gpu, /^FROM nvidia\/cuda:[^\n]*runtime/m)
    assert.match(gpu, /^COPY node \/usr\/local\/bin\/node$/m)
    assert.match(gpu, /^RUN apt-get update && apt-get install -y --no-install-recommends libgomp1 /m)
    assert.match(gpu, /^ENV [^\n]*LOG_FORMAT="json"/m)
    assert.match(gpu, /^ENV [^\n]*ORT_DISABLE_TELEMETRY=1/m, "the image turns onnxruntime's telemetry off")
    const own = (
      await bundle(['containerize', 'quickstart:1.0.0', '--print-dockerfile', '--base-image', 'my/node-cuda:1'], {
        BUNDLE_HOME: home,
      })
    ).stdout
    assert.match(own, /^FROM my\/node-cuda:1$/m)
    assert.doesNotMatch(own, /^COPY node /m, 'a given base image brings its own Node.js')
  })
})
