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
  const given = flags?.length ? flags : env.BUNDLE_TRUST ? [env.BUNDLE_TRUST] : (fromFile ?? [])
  const files = given
    .flatMap((f) => f.split(','))
    .map((f) => f.trim())
    .filter(Boolean)
  if (files.length === 0) return undefined
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

/** `bundle verify TAG… --trust PUB…`. */
export function verifyCommand(): Command {
  return new Command('verify')
    .description(
      'verify stored models against trusted public keys: the signature, its signer, and every file as stored; ' +
        'exit 1 with the reason when anything fails',
    )
    .argument('<tag...>')
    .option('--trust <file>', 'a trusted public key (PEM; repeatable; default $BUNDLE_TRUST)', collect, [])
    .action(async (tags: string[], opts: { trust: string[] }) => {
      const trusted = await trustedKeys(opts.trust)
      if (trusted === undefined)
        throw new BundleError('E_CLI_USAGE', 'bundle verify needs the public keys you trust: --trust PUB.pem')
      const { ModelStore, verifyModel } = await import('../store/index.js')
      const store = ModelStore.open()
      let failed = 0
      try {
        for (const t of tags) {
          const model = store.get(t)
          try {
            const v = await verifyModel(store, model, trusted)
            write(`${model.tag}: verified, ${v.files} files signed by ${v.signer} (key ${v.hint.slice(0, 16)}…)\n`)
          } catch (err) {
            if (!isBundleError(err)) throw err
            failed++
            process.stderr.write(`error ${err.code}: ${model.tag}: ${err.message}\n`)
          }
        }
      } finally {
        store.close()
      }
      if (failed) process.exitCode = 1
    })
}
