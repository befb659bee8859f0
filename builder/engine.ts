import { spawn, spawnSync } from 'node:child_process'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BundleError } from '../errors/index.js'

// Talking to the container engine (docker, podman, buildah): run a command and condense its
// output to progress lines, get the base image, read an image's size, and turn the engine's
// failures into coded errors.

export type Backend = 'docker' | 'podman' | 'buildah'

/** Engine output that means the base image could not be fetched from its registry. */
const PULL_FAILED = new RegExp(
  'pinging container registry|initializing source docker:|failed to resolve source metadata|error pulling image|' +
    'pull access denied|manifest unknown|name unknown|short-name .* did not resolve|repository does not exist|' +
    'requested access to the resource is denied',
  'i',
)
/** …and that the registry could not be reached at all (offline, firewalled, DNS). */
const UNREACHABLE = new RegExp(
  'dial tcp|no such host|connection refused|i/o timeout|network is unreachable|TLS handshake timeout|' +
    'Client\\.Timeout|temporary failure in name resolution|server misbehaving',
  'i',
)

/** The last meaningful line of engine output, with log decoration (time=… level=…) removed. */
function reason(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  const last = lines.findLast((l) => /error/i.test(l)) ?? lines.at(-1) ?? ''
  return last.replace(/^time="[^"]*" level=\w+ msg="(.*)"$/, '$1').replace(/^Error: /, '')
}

/** docker/local-base-image.sh as the user reaches it from here (a clone, or node_modules/modelbundle). */
function baseImageScript(): string {
  const abs = fileURLToPath(new URL('../../docker/local-base-image.sh', import.meta.url))
  const rel = relative(process.cwd(), abs)
  return rel.startsWith('..') ? abs : rel
}

/** A build failure that is the engine failing to pull the base image: E_CONTAINER_BASE_IMAGE. */
export const pullFailure =
  (image: string, node: string) =>
  (output: string): BundleError | undefined =>
    PULL_FAILED.test(output) ? baseImageError(image, output, node) : undefined

/** The coded error for a base image the engine could not pull, saying how to build offline. */
export function baseImageError(image: string, output: string, node: string): BundleError {
  const tag = `localhost/modelbundle-node:${node}`
  const offline = UNREACHABLE.test(output)
  return new BundleError(
    'E_CONTAINER_BASE_IMAGE',
    `the base image ${image} could not be pulled${offline ? ' (its registry cannot be reached)' : ''}: ` +
      `${reason(output)}. ` +
      `To build without a registry, pass --base-image IMAGE with an image already present locally, or assemble one ` +
      `from this machine: ` +
      `${baseImageScript()} -t ${tag} node_modules, then --base-image ${tag}`,
  )
}

/**
 * Runs an engine command. Each complete output line goes to `onLine`; the last lines are kept
 * for the error message. `classify` may turn a failure's output into a specific error; any
 * other failure is E_CONTAINER_BACKEND quoting the engine.
 */
export function runEngine(
  cmd: string,
  args: string[],
  onLine: (line: string) => void,
  classify?: (output: string) => BundleError | undefined,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let tail = ''
    const partial = { stdout: '', stderr: '' }
    const take = (stream: 'stdout' | 'stderr') => (c: string) => {
      const s = partial[stream] + c
      tail = (tail + c).slice(-4000)
      const lines = s.split('\n')
      partial[stream] = lines.pop()!
      for (const line of lines) onLine(line)
    }
    // Decoded as text per stream, so a character split across two chunks stays whole.
    child.stdout.setEncoding('utf8').on('data', take('stdout'))
    child.stderr.setEncoding('utf8').on('data', take('stderr'))
    child.on('error', (err) => reject(new BundleError('E_CONTAINER_BACKEND', `${cmd} could not start: ${err.message}`)))
    child.on('close', (code) => {
      for (const rest of [partial.stdout, partial.stderr]) if (rest) onLine(rest)
      if (code === 0) return resolve()
      const specific = classify?.(tail)
      if (specific) return reject(specific)
      reject(
        new BundleError(
          'E_CONTAINER_BACKEND',
          `${cmd} ${args[0]} failed (exit ${code}): ${tail.trim().split('\n').slice(-3).join(' | ')}`,
        ),
      )
    })
  })
}

/** Whether the engine holds the image locally. */
export function hasImage(backend: Backend, image: string): boolean {
  const args =
    backend === 'podman'
      ? ['image', 'exists', image]
      : backend === 'docker'
        ? ['image', 'inspect', image]
        : ['inspect', '--type', 'image', image]
  return spawnSync(backend, args, { stdio: 'ignore', timeout: 30_000 }).status === 0
}

const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12 }

/** An image's size in bytes as the engine reports it (uncompressed layers), or undefined when it cannot say. */
export function imageSize(backend: Backend, image: string): number | undefined {
  if (backend === 'buildah') {
    // buildah reports sizes only as text ("169 MB").
    const r = spawnSync('buildah', ['images', '--json', image], { encoding: 'utf8', timeout: 30_000 })
    const m = /"size":\s*"([\d.]+)\s*([kMGT]?B)"/i.exec(r.stdout ?? '')
    return m ? Math.round(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!) : undefined
  }
  const r = spawnSync(backend, ['image', 'inspect', '--format', '{{.Size}}', image], {
    encoding: 'utf8',
    timeout: 30_000,
  })
  const n = Number(r.stdout?.trim())
  return r.status === 0 && Number.isFinite(n) && n > 0 ? n : undefined
}

/**
 * Makes sure the base image is present before the build context is assembled: a base that
 * cannot be pulled fails in seconds with E_CONTAINER_BASE_IMAGE, not after copying the context.
 */
export async function ensureBaseImage(
  backend: Backend,
  image: string,
  node: string,
  log: (line: string) => void,
): Promise<'present' | 'pulled'> {
  if (image === 'scratch' || hasImage(backend, image)) return 'present'
  log(`pulling ${image} with ${backend}`)
  // Whatever stops a pull (no registry, no such image, no access), it is the base image's problem.
  await runEngine(
    backend,
    ['pull', image],
    () => undefined,
    (output) => baseImageError(image, output, node),
  )
  return 'pulled'
}

/**
 * Engine output lines worth showing as progress: the build steps (podman/buildah `STEP 3/9: …`,
 * docker `Step 3/9 :` or BuildKit `#7 [3/9] …`).
 */
export function buildStep(line: string): string | undefined {
  const l = line.trim()
  if (/^STEP \d+\/\d+ ?:/i.test(l)) return l
  const kit = /^#\d+ (\[[^\]]*\d+\/\d+\] .*)$/.exec(l)
  if (kit) return kit[1]
  if (/^COMMIT\b|^Successfully tagged\b|^naming to\b/i.test(l)) return l
  return undefined
}
