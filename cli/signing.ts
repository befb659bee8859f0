import { dirname, resolve } from 'node:path'
import { Command } from 'commander'
import { BundleError, isBundleError } from '../errors/index.js'
import type { TrustedKey } from '../store/index.js'
import { write } from './output.js'

const collect = (value: string, previous: string[]): string[] => [...previous, value]

/** serve.yaml's `trust:` — a list of public key files, relative to the config file. */
export function configTrust(doc: unknown, file: string): string[] | undefined {
  const t = doc !== null && typeof doc === 'object' ? (doc as { trust?: unknown }).trust : undefined
  if (t === undefined) return undefined
  const list = typeof t === 'string' ? [t] : t
  if (!Array.isArray(list) || list.some((f) => typeof f !== 'string' || f === ''))
    throw new BundleError('E_SERVE_CONFIG_INVALID', `${file}: trust must be a list of public key files (PEM)`)
  return list.map((f: string) => resolve(dirname(file), f))
}

/**
 * The public keys to trust: --trust (repeatable, or comma-separated), else $BUNDLE_TRUST
 * (comma-separated), else a config file's `trust:`. Each must be a PEM ECDSA public key; none
 * given: undefined (no policy, nothing is verified).
 */
export async function trustedKeys(
  flags: readonly string[] | undefined,
  env: NodeJS.ProcessEnv = process.env,
  fromFile?: readonly string[],
): Promise<TrustedKey[] | undefined> {
  // An empty BUNDLE_TRUST is unset, as every BUNDLE_* variable (manifests often set one empty).
  const fromEnv = env.BUNDLE_TRUST || undefined
  const given = flags?.length ? flags : fromEnv !== undefined ? [fromEnv] : fromFile
  if (given === undefined) return undefined
  const files = given
    .flatMap((f) => f.split(','))
    .map((f) => f.trim())
    .filter(Boolean)
  // Set but empty (BUNDLE_TRUST=",", --trust ""): a mistake, never a silent "verify nothing".
  if (files.length === 0)
    throw new BundleError(
      'E_KEY_INVALID',
      `${flags?.length ? '--trust' : fromEnv !== undefined ? 'BUNDLE_TRUST' : 'trust:'} names no key file; ` +
        'give the public keys to trust (PEM files), or leave it unset to verify nothing',
    )
  const { loadTrustedKey } = await import('../store/index.js')
  return files.map(loadTrustedKey)
}

/** `bundle keys generate DIR`. */
export function keysCommand(): Command {
  const generate = new Command('generate')
    .description('make an ECDSA P-256 key pair for signing: DIR/private.pem (mode 0600) and DIR/public.pem')
    .argument('<dir>')
    .action(async (dir: string) => {
      const { generateKeys } = await import('../store/index.js')
      const k = generateKeys(dir)
      write(
        `wrote ${k.privateKey} (keep it secret: it signs) and ${k.publicKey} (give it to --trust)\n` +
          `key ${k.hint}\n`,
      )
    })
  return new Command('keys').description('keys that sign models and bundles').addCommand(generate)
}

/** `bundle models sign TAG… --key KEY`. */
export function modelsSignCommand(): Command {
  return new Command('sign')
    .description(
      "sign stored models with a private key: an OMS v1.0 signature (model_signing's model.sig) over every file, " +
        'kept with the model version',
    )
    .argument('<tag...>')
    .requiredOption('--key <file>', 'the private key (PEM; bundle keys generate DIR writes DIR/private.pem)')
    .action(async (tags: string[], opts: { key: string }) => {
      const { ModelStore, loadPrivateKey, signModel } = await import('../store/index.js')
      loadPrivateKey(opts.key) // a bad key is refused before any model is touched
      const store = ModelStore.open()
      try {
        for (const t of tags) store.get(t) // every tag resolves before anything is signed
        for (const t of tags) {
          const { model, bundle } = await signModel(store, t, opts.key)
          write(
            `signed ${model.tag} (${model.files.length} files) with key ` +
              `${bundle.verificationMaterial.publicKey.hint}\n`,
          )
        }
      } finally {
        store.close()
      }
    })
}

/** `bundle sign BUNDLE_TAG --key KEY`. */
export function signCommand(): Command {
  return new Command('sign')
    .description(
      "sign a stored bundle with a private key: its files (bundle.json pins its models' digests, the code, the " +
        "Dockerfile) and its models' signatures (sign the models first)",
    )
    .argument('<bundle-tag>')
    .requiredOption('--key <file>', 'the private key (PEM; bundle keys generate DIR writes DIR/private.pem)')
    .action(async (tag: string, opts: { key: string }) => {
      const { ModelStore, loadPrivateKey, signBundle } = await import('../store/index.js')
      loadPrivateKey(opts.key)
      const store = ModelStore.open()
      try {
        const { bundle, signature } = await signBundle(store, tag, opts.key)
        write(
          `signed bundle ${bundle.tag} (${bundle.files.length} files, ${bundle.models.length} models) with key ` +
            `${signature.verificationMaterial.publicKey.hint}\n`,
        )
      } finally {
        store.close()
      }
    })
}

type Store = import('../store/index.js').ModelStore
type Lib = typeof import('../store/index.js')

/** What TAG names: a model, a bundle, or both (both are verified); neither is the store's not-found error. */
function targetsOf(store: Store, tag: string): { model?: string; bundle?: string } {
  let model: string | undefined
  let bundle: string | undefined
  let missing: unknown
  try {
    model = store.get(tag).tag
  } catch (err) {
    missing = err
  }
  try {
    bundle = store.bundles.get(tag).tag
  } catch {
    // not a bundle
  }
  if (model === undefined && bundle === undefined) throw missing
  return { ...(model ? { model } : {}), ...(bundle ? { bundle } : {}) }
}

/** Verifies one model or bundle; prints what verified, or the coded reason on stderr (false). */
async function verifyOne(lib: Lib, store: Store, kind: 'model' | 'bundle', tag: string, trusted: TrustedKey[]) {
  try {
    if (kind === 'model') {
      const v = await lib.verifyModel(store, store.get(tag), trusted)
      write(`${tag}: verified, ${v.files} files signed by ${v.signer} (key ${v.hint.slice(0, 16)}…)\n`)
    } else {
      const v = await lib.verifyBundle(store, tag, trusted)
      write(
        `bundle ${tag}: verified, ${v.files} files and model signatures signed by ${v.signer} (key ` +
          `${v.hint.slice(0, 16)}…); its ${v.models.length} models verified\n`,
      )
    }
    return true
  } catch (err) {
    if (!isBundleError(err)) throw err
    process.stderr.write(`error ${err.code}: ${kind === 'bundle' ? 'bundle ' : ''}${tag}: ${err.message}\n`)
    return false
  }
}

/** `bundle verify TAG|BUNDLE_TAG… --trust PUB…`. */
export function verifyCommand(): Command {
  return new Command('verify')
    .description(
      'verify stored models and bundles against trusted public keys: the signature, its signer, and every file ' +
        "as stored (a bundle's models too); exit 1 with the reason when anything fails",
    )
    .argument('<tag...>')
    .option('--trust <file>', 'a trusted public key (PEM; repeatable; default $BUNDLE_TRUST)', collect, [])
    .action(async (tags: string[], opts: { trust: string[] }) => {
      const trusted = await trustedKeys(opts.trust)
      if (trusted === undefined)
        throw new BundleError('E_CLI_USAGE', 'bundle verify needs the public keys you trust: --trust PUB.pem')
      const lib = await import('../store/index.js')
      const store = lib.ModelStore.open()
      let failed = 0
      try {
        const targets = tags.map((t) => targetsOf(store, t)) // every tag resolves before anything is verified
        for (const t of targets) {
          if (t.model && !(await verifyOne(lib, store, 'model', t.model, trusted))) failed++
          if (t.bundle && !(await verifyOne(lib, store, 'bundle', t.bundle, trusted))) failed++
        }
      } finally {
        store.close()
      }
      if (failed) process.exitCode = 1
    })
}
