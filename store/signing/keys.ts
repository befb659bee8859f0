import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BundleError } from '../../errors/index.js'

/** A public key the operator trusts, with the file it came from (named in what verification reports). */
export interface TrustedKey {
  key: KeyObject
  /** sha256 of the key's SPKI PEM text, hex: what a signature's `verificationMaterial.publicKey.hint` names. */
  hint: string
  file: string
}

/**
 * A key's hint as model_signing computes it: sha256 over the public key's PEM text (SPKI), hex.
 * Node writes the same PEM bytes as Python's cryptography, so hints agree across the two.
 */
export function keyHint(publicKey: KeyObject): string {
  return createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'pem' }) as string)
    .digest('hex')
}

const CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1'])

function readPem(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    throw new BundleError('E_KEY_INVALID', `${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`)
  }
}

/** Checks that a key is ECDSA on a curve OMS v1.0 allows (P-256, P-384, P-521). */
function ecdsa(key: KeyObject, file: string, what: string): KeyObject {
  const curve = key.asymmetricKeyDetails?.namedCurve
  if (key.asymmetricKeyType !== 'ec' || curve === undefined || !CURVES.has(curve))
    throw new BundleError(
      'E_KEY_INVALID',
      `${what} ${file} is a ${key.asymmetricKeyType ?? 'non-asymmetric'} key${curve ? ` on ${curve}` : ''}; model ` +
        'signatures use ECDSA on P-256, P-384 or P-521 (bundle keys generate DIR makes a P-256 pair)',
    )
  return key
}

/** The private key a signer gives with --key. */
export function loadPrivateKey(file: string): KeyObject {
  const pem = readPem(file, '--key')
  let key: KeyObject
  try {
    key = createPrivateKey(pem)
  } catch {
    throw new BundleError(
      'E_KEY_INVALID',
      `--key ${file} is not a PEM private key` +
        (pem.includes('PUBLIC KEY') ? ' (it is a public key: sign with DIR/private.pem)' : ''),
    )
  }
  return ecdsa(key, file, '--key')
}

/** A public key an operator trusts (--trust, BUNDLE_TRUST). */
export function loadTrustedKey(file: string): TrustedKey {
  const pem = readPem(file, '--trust')
  if (pem.includes('PRIVATE KEY'))
    throw new BundleError(
      'E_KEY_INVALID',
      `--trust ${file} is a private key; trust the public one (DIR/public.pem) and keep the private key with ` +
        'the signer',
    )
  let key: KeyObject
  try {
    key = createPublicKey(pem)
  } catch {
    throw new BundleError('E_KEY_INVALID', `--trust ${file} is not a PEM public key`)
  }
  ecdsa(key, file, '--trust')
  return { key, hint: keyHint(key), file }
}

/**
 * `bundle keys generate DIR`: an ECDSA P-256 pair, DIR/private.pem (PKCS#8, mode 0600) and
 * DIR/public.pem (SPKI). Refuses to overwrite a pair already there.
 */
export function generateKeys(dir: string): { privateKey: string; publicKey: string; hint: string } {
  const privateFile = join(dir, 'private.pem')
  const publicFile = join(dir, 'public.pem')
  for (const f of [privateFile, publicFile])
    if (existsSync(f)) throw new BundleError('E_KEY_EXISTS', `${f} exists; keys generate never overwrites a key`)
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  mkdirSync(dir, { recursive: true })
  // The private key is written with 0600 from its first byte, not chmod-ed after.
  writeFileSync(privateFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' })
  writeFileSync(publicFile, publicKey.export({ type: 'spki', format: 'pem' }), { mode: 0o644, flag: 'wx' })
  return { privateKey: privateFile, publicKey: publicFile, hint: keyHint(publicKey) }
}
