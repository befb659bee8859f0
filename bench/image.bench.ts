// npm run bench:image — the quickstart's container image: its size over its base, what the
// largest packages in it weigh, and how long `bundle containerize` takes. Built with podman on a
// base assembled from this machine (docker/local-base-image.sh; BENCH_BASE_IMAGE=IMAGE to use
// another one already present, e.g. node:20-bookworm-slim). Target from issue 14: the image is
// at most its base + 90 MB, the model included.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bytesByPackage, imageBytes, nodeModulesOf } from '../test/utils/image.js'
import { fmt, machine, writeSection } from './results.js'

const REPO = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(REPO, 'bin/bundle')
const TARGET_MB = 90
const home = mkdtempSync(join(tmpdir(), 'mb-bench-image-'))
const env = { ...process.env, BUNDLE_HOME: home }
const image = `localhost/quickstart-bench:${Date.now()}`
const BENCH_BASE = 'localhost/modelbundle-node-bench:20'
const mb = (bytes: number) => `${fmt(bytes / 1e6)} MB`

function cli(args: string[]): { stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', maxBuffer: 64 << 20 })
  if (r.status !== 0) throw new Error(`bundle ${args.join(' ')}: ${r.stderr}`)
  return r
}

try {
  cli(['build', join(REPO, 'examples/quickstart'), '--version', '1.0.0'])
  const base =
    process.env.BENCH_BASE_IMAGE ??
    execFileSync(join(REPO, 'docker/local-base-image.sh'), ['-t', BENCH_BASE, join(REPO, 'node_modules')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim()
  const t0 = performance.now()
  const built = cli(['containerize', 'quickstart:1.0.0', '-t', image, '--backend', 'podman', '--base-image', base])
  const seconds = (performance.now() - t0) / 1000
  const size = await imageBytes('podman', image)
  const baseSize = await imageBytes('podman', base)
  const over = size - baseSize
  const files = await nodeModulesOf('podman', image)
  const nodeModules = Object.values(files).reduce((a, b) => a + b, 0)
  const top = bytesByPackage(files).slice(0, 12)
  const progress = (step: string) => built.stderr.split('\n').find((l) => l.startsWith(step)) ?? ''
  writeSection(
    'image',
    `## Image size (\`npm run bench:image\`)\n\n${machine()}. The quickstart bundle (the text-direction model ` +
      `included), \`bundle containerize --backend podman\` on \`${base}\`; sizes as podman reports them ` +
      `(uncompressed layers, decimal MB).\n\n` +
      `| what | size |\n|---|---|\n| base image | ${mb(baseSize)} |\n| quickstart image | ${mb(size)} |\n| over ` +
      `the base (node_modules, bundle, model store) | **${mb(over)}** |\n| of which /app/node_modules (file ` +
      `bytes) | ${mb(nodeModules)} in ${Object.keys(files).length} files |\n| \`bundle containerize\` wall time ` +
      `(context + build) | ${fmt(seconds)} s |\n\n` +
      `Target: ≤ base + ${TARGET_MB} MB, model included — ${over <= TARGET_MB * 1e6 ? 'met' : 'missed'} ` +
      `(${mb(over)}). What came after that target: the gRPC server (@grpc/grpc-js, protobufjs, ` +
      `@grpc/proto-loader: 3.3 MB) and tracing (@opentelemetry/api and the bundled SDK: 1.2 MB); the containerize ` +
      `test holds the image to base + 95 MB.\n\n` +
      `Largest packages in the image:\n\n| package | size |\n|---|---|\n` +
      `${top.map(([p, b]) => `| ${p} | ${mb(b)} |`).join('\n')}\n\n` +
      `What \`bundle containerize\` reported on stderr:\n\n\`\`\`\n${progress('[2/4]')}\n${progress('[3/4]')}\n` +
      `${progress('built ')}\n\`\`\`\n\n` +
      `The floor is the native code the service runs: onnxruntime-node's Linux x64 library and sharp's libvips are ` +
      `most of it; the rest is JavaScript that is loaded (both the ESM and CommonJS builds where a package ships ` +
      `both, as either may be imported).`,
  )
  console.log({ base: baseSize, image: size, over, nodeModules, seconds })
} finally {
  spawnSync('podman', ['rmi', '-f', image], { stdio: 'ignore' })
  if (process.env.BENCH_BASE_IMAGE === undefined) spawnSync('podman', ['rmi', BENCH_BASE], { stdio: 'ignore' })
  rmSync(home, { recursive: true, force: true })
}
