import { sign as cryptoSign, verify as cryptoVerify, type KeyObject } from 'node:crypto'
import { createRequire } from 'node:module'
import type * as SigstoreBundle from '@sigstore/bundle'
import type * as SigstoreVerify from '@sigstore/verify'
import { BundleError } from '../../errors/index.js'
import { keyHint, type TrustedKey } from './keys.js'

// The signature file (model.sig): a Sigstore bundle v0.3 holding a DSSE envelope over the
// in-toto statement, signed with a key pair — the layout model_signing writes for `sign key`.
// Reading it goes through sigstore-js (@sigstore/bundle checks the bundle, @sigstore/verify the
// signature), so what we accept is what the Sigstore libraries accept.

// sigstore-js loads when a signature is read: about 2 MB of heap that a server with no signed
// model would carry and mark on every full GC. (CommonJS: require gives the copy an import would.)
const load = createRequire(import.meta.url)
const sigstoreBundle = (): typeof SigstoreBundle => load('@sigstore/bundle')
const sigstoreVerify = (): typeof SigstoreVerify => load('@sigstore/verify')

export const BUNDLE_MEDIA_TYPE = 'application/vnd.dev.sigstore.bundle.v0.3+json'
export const PAYLOAD_TYPE = 'application/vnd.in-toto+json'

/** An OMS v1.0 signature as written to model.sig. */
export interface SignatureBundle {
  mediaType: typeof BUNDLE_MEDIA_TYPE
  verificationMaterial: { publicKey: { hint: string }; tlogEntries: [] }
  dsseEnvelope: { payload: string; payloadType: typeof PAYLOAD_TYPE; signatures: { sig: string; keyid: string }[] }
}

/** DSSE's pre-authentication encoding: what the signature is over. */
export function pae(type: string, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`DSSEv1 ${Buffer.byteLength(type)} ${type} ${body.length} `), body])
}

const DIGESTS: Record<string, string> = { prime256v1: 'sha256', secp384r1: 'sha384', secp521r1: 'sha512' }

/** Signs a statement with an ECDSA private key (a DER signature over the PAE, as model_signing does). */
export function signStatement(statement: unknown, privateKey: KeyObject, publicKey: KeyObject): SignatureBundle {
  const payload = Buffer.from(JSON.stringify(statement, null, 2))
  const digest = DIGESTS[privateKey.asymmetricKeyDetails?.namedCurve ?? ''] ?? 'sha256'
  const sig = cryptoSign(digest, pae(PAYLOAD_TYPE, payload), privateKey)
  return {
    mediaType: BUNDLE_MEDIA_TYPE,
    verificationMaterial: { publicKey: { hint: keyHint(publicKey) }, tlogEntries: [] },
    dsseEnvelope: {
      payload: payload.toString('base64'),
      payloadType: PAYLOAD_TYPE,
      signatures: [{ sig: sig.toString('base64'), keyid: '' }],
    },
  }
}

const malformed = (why: string) =>
  new BundleError('E_SIG_MALFORMED', `the signature is not an OMS v1.0 Sigstore bundle: ${why}`)

/**
 * Checks a signature file's bytes against the trusted keys and answers the signed payload and the
 * key that signed it. Refuses, each with its code: bytes that are not such a bundle (truncated,
 * edited into invalid JSON), a key not trusted, a signature that does not verify over the payload.
 */
export function openSignature(text: string, trusted: readonly TrustedKey[]): { payload: Buffer; signer: TrustedKey } {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw malformed(`not JSON (${text.length} bytes${text.length ? '' : ': empty'}; truncated?)`)
  }
  const { bundleFromJSON, isBundleWithDsseEnvelope, isBundleWithPublicKey } = sigstoreBundle()
  let bundle: ReturnType<typeof SigstoreBundle.bundleFromJSON>
  try {
    bundle = bundleFromJSON(json)
  } catch (err) {
    throw malformed((err as Error).message)
  }
  if (!isBundleWithDsseEnvelope(bundle)) throw malformed('it holds no DSSE envelope')
  if (!isBundleWithPublicKey(bundle))
    throw malformed("it is not signed with a key pair (keyless signatures need Sigstore's trust root)")
  const envelope = bundle.content.dsseEnvelope
  if (envelope.payloadType !== PAYLOAD_TYPE)
    throw malformed(`payloadType is ${JSON.stringify(envelope.payloadType)}, not ${PAYLOAD_TYPE}`)
  const hint = bundle.verificationMaterial.content.publicKey.hint
  const signer = trusted.find((k) => k.hint === hint)
  if (signer === undefined)
    throw new BundleError(
      'E_SIG_UNTRUSTED',
      `signed by key ${hint.slice(0, 16)}…, which is not trusted (trusted: ${
        trusted.map((k) => `${k.file} ${k.hint.slice(0, 16)}…`).join(', ') || 'none'
      })`,
    )
  const payload = Buffer.from(envelope.payload)
  const why = checkSignature(bundle, signer, payload, envelope.signatures[0]!.sig)
  if (why !== undefined)
    throw new BundleError(
      'E_SIG_INVALID',
      `the signature by ${signer.file} does not verify over its statement (${why}): the statement or the ` +
        'signature was changed after signing',
    )
  return { payload, signer }
}

/**
 * The DSSE signature against the signer's key: why it fails, or undefined. P-256 goes through
 * sigstore-js's Verifier. It hashes every EC signature with SHA-256, so P-384 and P-521 (signed
 * with SHA-384 / SHA-512, as DIGESTS says) are checked here over the same pre-authentication encoding.
 */
function checkSignature(
  bundle: ReturnType<typeof SigstoreBundle.bundleFromJSON>,
  signer: TrustedKey,
  payload: Buffer,
  sig: Buffer,
): string | undefined {
  const curve = signer.key.asymmetricKeyDetails?.namedCurve ?? ''
  if (curve !== 'prime256v1')
    return cryptoVerify(DIGESTS[curve] ?? 'sha256', pae(PAYLOAD_TYPE, payload), signer.key, sig)
      ? undefined
      : 'ECDSA check failed'
  const material: SigstoreVerify.TrustMaterial = {
    certificateAuthorities: [],
    timestampAuthorities: [],
    tlogs: [],
    ctlogs: [],
    publicKey: (h: string) => {
      if (h !== signer.hint) throw new Error(`unknown key ${h}`)
      return { publicKey: signer.key, validFor: () => true }
    },
  }
  const { toSignedEntity, Verifier } = sigstoreVerify()
  try {
    // Key-pair signatures carry no log entry or timestamp: none is required.
    new Verifier(material, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(
      toSignedEntity(bundle),
    )
    return undefined
  } catch (err) {
    return (err as Error).message
  }
}
