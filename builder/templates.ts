import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { IMAGE_UID, type BundleManifest } from './manifest.js'

const template = (name: string): string =>
  readFileSync(fileURLToPath(new URL(`../../docker/${name}`, import.meta.url)), 'utf8')

/** The image a bundle's image builds FROM: --base-image, else bundle.yaml's (GPU or not). */
export const baseImageOf = (m: BundleManifest, baseImage?: string): string =>
  baseImage ?? (m.docker.gpu ? m.docker.gpu.baseImage : m.docker.baseImage)

/** The Dockerfile for a bundle's image, from docker/Dockerfile.template (see that file for the layers). */
/**
 * The trust lines of an image built with `--trust` (the keys as trust/0.pem, …): BUNDLE_TRUST
 * makes the server verify the bundle, and every model before it loads, before anything runs.
 */
function trustLines(keys: number): string {
  if (keys === 0) return '# (no --trust: the image serves without verifying signatures)'
  const files = Array.from({ length: keys }, (_, i) => `/etc/modelbundle/trust/${i}.pem`)
  return (
    '# Built with --trust: the bundle and every model are verified against these keys before they run.\n' +
    `COPY trust /etc/modelbundle/trust\nENV BUNDLE_TRUST=${files.join(',')}`
  )
}

export function renderDockerfile(m: BundleManifest, baseImage?: string, trustKeys = 0): string {
  const base = baseImageOf(m, baseImage)
  const node = needsNode(m, baseImage)
    ? "# CUDA base images have no Node.js: the build machine's node binary comes along.\nCOPY node /usr/local/bin/node"
    : '# (Node.js comes with the base image)'
  const packages = m.docker.systemPackages.length
    ? `RUN apt-get update && apt-get install -y --no-install-recommends ${m.docker.systemPackages.join(' ')} && rm ` +
      `-rf /var/lib/apt/lists/*`
    : '# (no system packages)'
  const env = Object.entries(m.env)
    .map(([k, v]) => ` ${k}=${JSON.stringify(v)}`)
    .join('')
  return template('Dockerfile.template')
    .replaceAll('{{BASE_IMAGE}}', base)
    .replaceAll('{{NODE}}', node)
    .replaceAll('{{SYSTEM_PACKAGES}}', packages)
    .replaceAll('{{UID}}', String(IMAGE_UID))
    .replaceAll('{{ENV}}', env)
    .replaceAll('{{TRUST}}', trustLines(trustKeys))
}

/** A GPU bundle on its CUDA base image (no --base-image given) brings its own node binary. */
export const needsNode = (m: BundleManifest, baseImage?: string): boolean =>
  baseImage === undefined && m.docker.gpu !== false

/** The README.md a bundle carries: what it serves and how to run it. */
export function renderReadme(m: BundleManifest): string {
  const apis = m.apis.map((a) => `| \`POST ${a.route}\` | ${a.input} | ${a.output} |`).join('\n')
  const models = m.models.length
    ? m.models
        .map((x) => `- \`${x.tag}\` (${x.digest})${x.requested?.length ? ` — for ${x.requested.join(', ')}` : ''}`)
        .join('\n')
    : '- none'
  const deps = Object.entries(m.dependencies)
    .map(([k, v]) => `${k}@${v}`)
    .join(', ')
  return `# ${m.name}

${m.description ?? 'A modelbundle service.'}

## APIs

| route | input | output |
|---|---|---|
${apis}

OpenAPI: \`openapi.json\` in this bundle, and \`GET /openapi.json\` or \`/docs\` on a running server.

## Models

${models}

## Run it

\`\`\`sh
bundle serve ${m.name}:latest            # from a store holding this bundle and its models
bundle containerize ${m.name}:latest -t ${m.name}:latest
\`\`\`

Built with Node.js ${m.node}; npm dependencies: ${deps || 'none'}.
`
}
