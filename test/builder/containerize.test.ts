import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

// End to end with a real container engine: build the quickstart bundle, containerize it with
// podman on a base image assembled from this machine (no registry here), run it, ask it.
// .ci/run installs podman and sets BUNDLE_REQUIRE_CONTAINER_TESTS=1, so CI cannot skip this.

const sh = promisify(execFile)
const REPO = fileURLToPath(new URL('../..', import.meta.url))
const QUICKSTART = join(REPO, 'examples/quickstart')
const hasPodman = spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0
const required = process.env.BUNDLE_REQUIRE_CONTAINER_TESTS === '1'
const skip = !hasPodman && !required ? 'podman is not installed (README "Containers" says how); CI installs it' : false

describe('bundle containerize (podman)', { skip }, () => {
  it('the quickstart image runs as non-root, answers /classify correctly, serves /metrics and stops cleanly', { timeout: 600_000 }, async () => {
    assert.ok(hasPodman, 'podman is required here (BUNDLE_REQUIRE_CONTAINER_TESTS=1)')
    const home = join(tempDir(), 'home')
    const env = { BUNDLE_HOME: home }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const base = (await sh(join(REPO, 'docker/local-base-image.sh'), ['-t', 'localhost/modelbundle-node-test:20', join(REPO, 'node_modules')], { maxBuffer: 64 << 20 })).stdout.trim()
    assert.equal(base, 'localhost/modelbundle-node-test:20')

    const dockerfile = (await bundle(['containerize', 'quickstart:1.0.0', '--print-dockerfile', '--base-image', base], env)).stdout
    const order = ['FROM ', 'COPY node_modules', 'COPY bundle', 'COPY --chown=10001:10001 models', 'EXPOSE 3000', 'USER 10001', 'HEALTHCHECK', 'ENTRYPOINT'].map((s) => dockerfile.indexOf(s))
    assert.ok(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)), `layer order: ${order}`)

    const image = `localhost/quickstart-e2e:${Date.now()}`
    const built = await bundle(['containerize', 'quickstart:1.0.0', '-t', image, '--backend', 'podman', '--base-image', base], env)
    assert.equal(built.code, 0, built.stderr.slice(-2000))
    assert.equal(built.stdout.trim(), image)
    const name = `qs-e2e-${process.pid}`
    try {
      const inspected = JSON.parse((await sh('podman', ['image', 'inspect', image])).stdout)[0] as { Config: { User: string; ExposedPorts: Record<string, unknown>; Labels: Record<string, string> }; Healthcheck?: { Test: string[] } }
      const config = inspected.Config
      assert.equal(config.User, '10001:10001')
      assert.ok('3000/tcp' in config.ExposedPorts)
      assert.equal(config.Labels['modelbundle.bundle'], 'quickstart:1.0.0')
      assert.match(config.Labels['modelbundle.digest']!, /^sha256:[0-9a-f]{64}$/)
      assert.ok(inspected.Healthcheck?.Test.join(' ').includes('/livez'), 'a health check on /livez')

      const port = 22000 + Math.floor(Math.random() * 20000)
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
        const r = await fetch(`${url}/classify`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png })
        assert.equal(r.status, 200)
        assert.equal(((await r.json()) as { angle: number }).angle, angle)
      }
      const metrics = await (await fetch(`${url}/metrics`)).text()
      assert.match(metrics, /bundle_runner_inference_total\{[^}]*runner="ocr-cls"[^}]*\} 2/)
      const user = (await sh('podman', ['exec', name, 'node', '-p', 'process.getuid()'])).stdout.trim()
      assert.equal(user, '10001')
      await sh('podman', ['stop', '-t', '20', name])
      const state = JSON.parse((await sh('podman', ['inspect', name])).stdout)[0].State as { ExitCode: number }
      assert.equal(state.ExitCode, 0, 'SIGTERM: drained and exited 0')
    } finally {
      await sh('podman', ['rm', '-f', name]).catch(() => undefined)
      await sh('podman', ['rmi', '-f', image]).catch(() => undefined)
    }
  })
})
