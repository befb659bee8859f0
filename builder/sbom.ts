import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Factories } from '@cyclonedx/cyclonedx-library/Contrib/License'
import { ComponentType, HashAlgorithm } from '@cyclonedx/cyclonedx-library/Enums'
import {
  Bom,
  Component,
  HashDictionary,
  LicenseRepository,
  Property,
  PropertyRepository,
} from '@cyclonedx/cyclonedx-library/Models'
import { JSON as SerJSON, JsonSerializer } from '@cyclonedx/cyclonedx-library/Serialize'
import { isSupportedSpdxId } from '@cyclonedx/cyclonedx-library/SPDX'
import { Spec1dot6 } from '@cyclonedx/cyclonedx-library/Spec'
import type { ModelInfo } from '../store/index.js'
import type { InstalledPackage } from './deps.js'

// The bundle's software bill of materials: CycloneDX 1.6 JSON, built with the CycloneDX project's
// own library. Every npm package the bundle runs with (the installed closure of its imports, as
// its lockfile pins them: version, license, integrity hash) and every model it pins (a
// machine-learning-model component with its sha256). No timestamp and a serial number derived from
// the content: building the same inputs gives the same bytes, as the rest of a bundle.

/** `pkg:npm/%40scope/name@1.2.3`: the package URL of an npm package. */
export const npmPurl = (name: string, version: string): string =>
  `pkg:npm/${name.startsWith('@') ? `%40${name.slice(1)}` : name}@${version}`

/** The lockfile's `integrity` (sha512-BASE64, or sha1-…) as a CycloneDX hash, when it is SHA-512. */
function integrityHash(integrity: unknown): HashDictionary {
  const m = typeof integrity === 'string' ? /^sha512-([A-Za-z0-9+/=]+)$/.exec(integrity.split(' ')[0]!) : null
  return m
    ? new HashDictionary([[HashAlgorithm['SHA-512'], Buffer.from(m[1]!, 'base64').toString('hex')]])
    : new HashDictionary()
}

/**
 * Whether text is an SPDX license expression: SPDX ids joined by AND / OR / WITH, in parentheses
 * or not. The factory then writes it as an expression; anything else becomes a named license.
 */
function spdxExpression(text: string): void {
  const tokens = text.replace(/[()]/g, ' ').split(/\s+/).filter(Boolean)
  const ok =
    tokens.length >= 3 &&
    tokens.every((t, i) =>
      i % 2 ? ['AND', 'OR', 'WITH'].includes(t) : isSupportedSpdxId(t.replace(/\+$/, '')) || tokens[i - 1] === 'WITH',
    )
  if (!ok) throw new RangeError(`not an SPDX license expression: ${text}`)
}

/** A package's license as its package.json states it (an SPDX id, an expression, or a name). */
function licenseOf(dir: string, factory: Factories.LicenseFactory): LicenseRepository {
  try {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { license?: unknown }
    const text = typeof pkg.license === 'string' ? pkg.license : (pkg.license as { type?: string } | undefined)?.type
    return text ? new LicenseRepository([factory.makeFromString(text)]) : new LicenseRepository()
  } catch {
    return new LicenseRepository()
  }
}

/** The package-lock.json nearest above `from`, parsed (undefined when there is none or it is unreadable). */
function nearestLock(from: string): Record<string, unknown> | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package-lock.json')
    if (existsSync(file))
      try {
        return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>
      } catch {
        return undefined
      }
    if (dirname(dir) === dir) return undefined
  }
}

/** name@version → integrity, from a lockfile's `packages` (keys are paths ending in node_modules/NAME). */
function integrities(lock: Record<string, unknown> | undefined): Map<string, unknown> {
  const out = new Map<string, unknown>()
  const packages = (lock?.packages ?? {}) as Record<string, { version?: string; integrity?: unknown }>
  for (const [key, entry] of Object.entries(packages)) {
    const at = key.lastIndexOf('node_modules/')
    if (at < 0 || entry.version === undefined) continue
    out.set(`${key.slice(at + 'node_modules/'.length)}@${entry.version}`, entry.integrity)
  }
  return out
}

export interface SbomInput {
  name: string
  /** The installed packages the bundle runs with. */
  packages: readonly InstalledPackage[]
  /** The project directory: its package-lock.json (the nearest above it) gives each package's integrity hash. */
  project: string
  models: readonly ModelInfo[]
}

/** The bundle's CycloneDX 1.6 JSON SBOM. */
export function renderSbom(input: SbomInput): string {
  const bom = new Bom()
  bom.metadata.component = new Component(ComponentType.Application, input.name, { bomRef: `bundle:${input.name}` })
  const licenses = new Factories.LicenseFactory(spdxExpression)
  const integrity = integrities(nearestLock(input.project))
  for (const pkg of input.packages) {
    const purl = npmPurl(pkg.name, pkg.version)
    bom.components.add(
      new Component(ComponentType.Library, pkg.name, {
        version: pkg.version,
        bomRef: purl,
        purl,
        licenses: licenseOf(pkg.dir, licenses),
        hashes: integrityHash(integrity.get(`${pkg.name}@${pkg.version}`)),
      }),
    )
  }
  for (const m of input.models) {
    bom.components.add(
      new Component(ComponentType.MachineLearningModel, m.name, {
        version: m.version,
        bomRef: `model:${m.tag}`,
        // The model's digest: sha256 over its files' paths, sizes and sha256s; each file's is a property.
        hashes: new HashDictionary([[HashAlgorithm['SHA-256'], m.digest.replace(/^sha256:/, '')]]),
        properties: new PropertyRepository(m.files.map((f) => new Property(`modelbundle:file:${f.path}`, f.sha256))),
      }),
    )
  }
  const json = new JsonSerializer(new SerJSON.Normalize.Factory(Spec1dot6)).serialize(bom, {
    sortLists: true,
    space: 2,
  })
  // A serial number from the content (RFC 4122 form), not a random one: the same inputs, the same file.
  const doc = JSON.parse(json) as Record<string, unknown>
  const h = createHash('sha256').update(json).digest('hex')
  const uuid = [h.slice(0, 8), h.slice(8, 12), `5${h.slice(13, 16)}`, `8${h.slice(17, 20)}`, h.slice(20, 32)]
  const serial = `urn:uuid:${uuid.join('-')}`
  return `${JSON.stringify({ ...doc, serialNumber: serial }, null, 2)}\n`
}
