import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Spec1dot6 } from '@cyclonedx/cyclonedx-library/Spec'
import { JsonStrictValidator } from '@cyclonedx/cyclonedx-library/Validation'
import { npmPurl } from '../../builder/sbom.js'
import { bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

// The SBOM `bundle build` writes and `bundle sbom` prints, checked against the CycloneDX 1.6 JSON
// schema (the CycloneDX library's own strict validator, offline) and against what the bundle holds.

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

interface Sbom {
  bomFormat: string
  specVersion: string
  serialNumber: string
  metadata: { component: { name: string } }
  components: {
    type: string
    name: string
    version: string
    purl?: string
    hashes?: { alg: string; content: string }[]
    licenses?: unknown[]
    properties?: { name: string; value: string }[]
  }[]
}

describe('bundle sbom: CycloneDX 1.6 for every bundle', () => {
  const env = { BUNDLE_HOME: join(tempDir(), 'home') }

  it('validates against the CycloneDX 1.6 schema and lists every package and every model', {
    timeout: 300_000,
  }, async () => {
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const r = await bundle(['sbom', 'quickstart:1.0.0'], env)
    assert.equal(r.code, 0, r.stderr)
    const errors = await new JsonStrictValidator(Spec1dot6.version).validate(r.stdout)
    assert.equal(errors, null, JSON.stringify(errors))
    const sbom = JSON.parse(r.stdout) as Sbom
    assert.equal(sbom.bomFormat, 'CycloneDX')
    assert.equal(sbom.specVersion, '1.6')
    assert.equal(sbom.metadata.component.name, 'quickstart')
    const info = JSON.parse((await bundle(['get', 'quickstart:1.0.0', '-o', 'json'], env)).stdout) as {
      manifest: { packages: string[] }
      models: { tag: string; digest: string }[]
    }
    // Every package the bundle runs with: version, purl, and the lockfile's integrity as SHA-512.
    const libraries = sbom.components.filter((c) => c.type === 'library')
    assert.deepEqual(libraries.map((c) => `${c.name}@${c.version}`).sort(), [...info.manifest.packages].sort())
    for (const c of libraries) assert.equal(c.purl, npmPurl(c.name, c.version))
    const withHash = libraries.filter((c) =>
      c.hashes?.some((h) => h.alg === 'SHA-512' && /^[0-9a-f]{128}$/.test(h.content)),
    )
    assert.ok(withHash.length >= libraries.length - 1, `integrity hashes: ${withHash.length} of ${libraries.length}`)
    const withLicense = libraries.filter((c) => (c.licenses?.length ?? 0) > 0)
    assert.ok(withLicense.length >= libraries.length * 0.9, `licenses: ${withLicense.length} of ${libraries.length}`)
    // Every model it pins, with its sha256 (the model digest) and each file's.
    const models = sbom.components.filter((c) => c.type === 'machine-learning-model')
    assert.deepEqual(
      models.map((m) => `${m.name}:${m.version} sha256:${m.hashes?.find((h) => h.alg === 'SHA-256')?.content}`),
      info.models.map((m) => `${m.tag} ${m.digest}`),
    )
    assert.ok(models.every((m) => m.properties?.some((p) => p.name.startsWith('modelbundle:file:'))))
    // The same inputs give the same SBOM (and the same bundle): no timestamp, a serial from the content.
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.1'], env)).code, 0)
    assert.equal((await bundle(['sbom', 'quickstart:1.0.1'], env)).stdout, r.stdout)
  })

  it('a bundle that is not stored is the store’s error', async () => {
    const r = await bundle(['sbom', 'nothing:1'], env)
    assert.equal(r.code, 1)
    assert.match(r.stderr, /E_BUNDLE_NOT_FOUND/)
  })
})
