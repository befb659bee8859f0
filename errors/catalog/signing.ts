import { type CatalogEntry, entry } from './entry.js'

/**
 * Signed models and bundles: keys, signatures (OMS v1.0 Sigstore bundles) and what verification
 * refuses. A refused model is answered 403: the operator's policy forbids it, and asking again
 * changes nothing until the model or the trust set does.
 */
export const SIGNING = {
  E_KEY_INVALID: entry(
    400,
    2,
    'A key file is missing, unreadable, or not a PEM ECDSA key of the kind the command needs (a private key to ' +
      'sign, a public key to trust).',
    'Give the files `bundle keys generate DIR` wrote: DIR/private.pem to --key, DIR/public.pem to --trust.',
  ),
  E_KEY_EXISTS: entry(
    409,
    1,
    'The directory already holds a key pair; generating would overwrite it.',
    'Choose another directory, or move the old keys away first (signatures made with them stay verifiable only ' +
      'with their public key).',
  ),
  E_SIG_UNSIGNED: entry(
    403,
    1,
    'Trust is set (--trust, BUNDLE_TRUST) and the model or bundle carries no signature.',
    'Sign it with `bundle models sign TAG --key KEY` (or `bundle sign BUNDLE_TAG --key KEY`), or serve without ' +
      '--trust.',
  ),
  E_SIG_MALFORMED: entry(
    403,
    1,
    'The signature is not an OMS v1.0 Sigstore bundle: not JSON, truncated, or missing the DSSE envelope, the ' +
      'in-toto statement or its model_signing predicate.',
    'Sign the model again with `bundle models sign`; a model.sig from elsewhere must be a key-based OMS v1.0 bundle.',
  ),
  E_SIG_UNTRUSTED: entry(
    403,
    1,
    'The signature was made by a key that is not in the trust set.',
    "Add the signer's public key to --trust if you approve it, or have the model signed by a trusted key.",
  ),
  E_SIG_INVALID: entry(
    403,
    1,
    'The signature does not verify over its statement: the statement (or the signature) was changed after signing.',
    'Do not serve it; sign the approved model again with `bundle models sign`.',
  ),
  E_SIG_WRONG_MODEL: entry(
    403,
    1,
    "The signature is another model's: it was made for another name, and none of the files it lists is one of this " +
      "model's files.",
    'Sign this model (`bundle models sign TAG --key KEY`); a signature belongs to the files it was made for.',
  ),
  E_SIG_FILE_MODIFIED: entry(
    403,
    1,
    "A model file's content differs from what was signed.",
    'Do not serve it: restore the signed file (import the model again from a trusted source) or sign the new ' +
      'content if you approve it.',
  ),
  E_SIG_FILE_ADDED: entry(
    403,
    1,
    'The model has a file the signature does not list.',
    'Remove the file, or sign the model again if you approve it.',
  ),
  E_SIG_FILE_MISSING: entry(
    403,
    1,
    'A file the signature lists is not in the model.',
    'Restore the file (import the model again from a trusted source), or sign the model again if you approve it.',
  ),
  E_SIG_FILE_RENAMED: entry(
    403,
    1,
    'A signed file is present under another name.',
    'Restore its signed name, or sign the model again if you approve it.',
  ),
} as const satisfies Record<string, CatalogEntry>
