import { existsSync, readFileSync } from 'node:fs'
import { register } from 'node:module'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { BundleManifest, EnsembleSpec } from '../builder/index.js'
import { BundleError, isBundleError } from '../errors/index.js'
import type { ServiceDefinition } from '../framework/index.js'

/** A built bundle directory holds bundle.json. */
export const isBundleDir = (dir: string): boolean => existsSync(join(dir, 'bundle.json'))

/**
 * Loads a built bundle (compiled JavaScript: no tsx, no TypeScript at run time) and pins its
 * runners to the exact model versions and digests it was built with.
 */
export async function loadBundle(dir: string): Promise<{ definition: ServiceDefinition; manifest: BundleManifest }> {
  let manifest: BundleManifest
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8')) as BundleManifest
  } catch (err) {
    throw new BundleError('E_BUNDLE_INVALID', `${dir}/bundle.json cannot be read: ${(err as Error).message}`)
  }
  if (manifest.schema !== 1 || typeof manifest.service?.entry !== 'string')
    throw new BundleError('E_BUNDLE_INVALID', `${dir}/bundle.json is not a bundle manifest this version understands`)
  // Environment from bundle.yaml; what the operator set wins.
  for (const [k, v] of Object.entries(manifest.env ?? {})) process.env[k] ??= v
  // The framework loads before any resolution hook exists: its hundreds of modules then resolve
  // on the main thread, not one by one through the hooks thread (≈ a tenth of a second saved).
  const { definitionOf } = await import('../framework/index.js')
  if (!existsSync(join(dir, 'node_modules'))) {
    const own = new URL('../../', import.meta.url)
    register(new URL('./bundle-hooks.js', import.meta.url), {
      parentURL: import.meta.url,
      data: {
        root: pathToFileURL(`${dir}/`).href,
        bases: [pathToFileURL(join(process.cwd(), 'noop.js')).href, new URL('noop.js', own).href],
      },
    })
  }
  let mod: Record<string, unknown>
  try {
    mod = (await import(pathToFileURL(join(dir, manifest.service.entry)).href)) as Record<string, unknown>
  } catch (err) {
    throw new BundleError(
      'E_SERVICE_LOAD',
      `loading bundle ${manifest.name} failed: ${(err as Error).message?.split('\n')[0]}`,
      { cause: err },
    )
  }
  const definition = definitionOf(mod[manifest.service.export])
  if (definition === undefined)
    throw new BundleError(
      'E_BUNDLE_INVALID',
      `bundle ${manifest.name}: ${manifest.service.entry} exports no service named ${manifest.service.export}`,
    )
  const pins: Pin[] = []
  for (const runner of definition.runners) {
    const versions = runner.versions
    if (versions === undefined) continue
    const tag = versions.tag
    const model = manifest.models.find((m) => m.tag === tag || m.requested?.includes(tag))
    if (model === undefined)
      throw new BundleError(
        'E_BUNDLE_INVALID',
        `bundle ${manifest.name}: runner ${runner.name} asks for ${tag}, which the bundle does not pin`,
      )
    versions.pin(model.tag, model.digest)
    pins.push({ runner: runner.name, tag: model.tag, digest: model.digest })
  }
  await checkPins(pins)
  return { definition: await withEnsembles(definition, manifest.ensembles), manifest }
}

interface Pin {
  runner: string
  tag: string
  digest: string
}

/**
 * Every model the runners pin is in the store, with the content the bundle was built with. The
 * runners check this again as they start, but that is after the server listens: a bundle that
 * cannot serve must fail before it opens a port (and before a probe or a client sees it).
 */
async function checkPins(pins: readonly Pin[]): Promise<void> {
  if (pins.length === 0) return
  const { ModelStore } = await import('../store/index.js')
  const store = ModelStore.open()
  try {
    for (const pin of pins) {
      let digest: string
      try {
        digest = store.get(pin.tag).digest
      } catch (err) {
        if (!isBundleError(err) || err.code !== 'E_STORE_MODEL_NOT_FOUND') throw err
        throw new BundleError(
          'E_BUNDLE_MODEL_MISMATCH',
          `runner ${pin.runner}: the bundle pins ${pin.tag}, which is not in the store at ${store.home}; ` +
            "import the bundle's archive (it carries its models)",
        )
      }
      if (digest !== pin.digest)
        throw new BundleError(
          'E_BUNDLE_MODEL_MISMATCH',
          `runner ${pin.runner}: the bundle pins ${pin.tag} with digest ${pin.digest}, the store has ${digest}`,
        )
    }
  } finally {
    store.close()
  }
}

/** bundle.yaml's ensembles join the service's runners; they start after the models they call. */
export async function withEnsembles(
  definition: ServiceDefinition,
  ensembles: Record<string, EnsembleSpec> | undefined,
): Promise<ServiceDefinition> {
  if (ensembles === undefined || Object.keys(ensembles).length === 0) return definition
  const { ensemble } = await import('../runners/index.js')
  const added = Object.entries(ensembles).map(([name, spec]) => ensemble(name, spec))
  return Object.freeze({ ...definition, runners: Object.freeze([...definition.runners, ...added]) })
}
