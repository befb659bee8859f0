import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import { bundleFromJSON, isBundleWithDsseEnvelope, isBundleWithPublicKey } from '@sigstore/bundle'
import { toSignedEntity, Verifier } from '@sigstore/verify'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import {
  generateKeys,
  loadTrustedKey,
  ModelStore,
  putSignature,
  signModel,
  storedSignature,
  verifyModel,
} from '../../store/index.js'
import { sizedModel } from '../utils/sized-models.js'
import { tempDir } from '../utils/tmp.js'

// Model signatures (OMS v1.0 Sigstore bundles) with real keys, a real store and real files: what
// `bundle models sign` writes, checked by sigstore-js and by an implementation outside modelbundle
// (openssl and Python's hashlib), and a tamper corpus that verification refuses, each with its code.

describe('signed models: OMS v1.0 signatures made, stored and verified', () => {
  const dir = tempDir()
  const home = join(dir, 'home')
  const keysA = generateKeys(join(dir, 'a'))
  const keysB = generateKeys(join(dir, 'b'))
  const trustA = [loadTrustedKey(keysA.publicKey)]
  let n = 0
  /** A model of its own content (k), optionally with more files. */
  const saveModel = async (
    store: ModelStore,
    name: string,
    extra: Record<string, string> = {},
    file = 'model.onnx',
  ) => {
    const d = join(dir, `m${n++}`)
    mkdirSync(d)
    writeFileSync(join(d, file), sizedModel(n, 4096 + n))
    for (const [f, text] of Object.entries(extra)) {
      mkdirSync(dirname(join(d, f)), { recursive: true })
      writeFileSync(join(d, f), text)
    }
    return store.save({ name, version: '1', paths: [d] })
  }
  /** The refusal verification gives (its code), or 'ok'. */
  const outcome = async (store: ModelStore, tag: string, trusted = trustA) => {
    try {
      await verifyModel(store, store.get(tag), trusted)
      return 'ok'
    } catch (err) {
      return (err as { code?: string }).code ?? String(err)
    }
  }

  it('keys generate writes a P-256 pair, the private key 0600, and never overwrites', () => {
    assert.equal(statSync(keysA.privateKey).mode & 0o777, 0o600)
    assert.match(readFileSync(keysA.publicKey, 'utf8'), /BEGIN PUBLIC KEY/)
    assert.equal(createPublicKey(readFileSync(keysA.publicKey)).asymmetricKeyDetails?.namedCurve, 'prime256v1')
    assert.throws(() => generateKeys(join(dir, 'a')), { code: 'E_KEY_EXISTS' })
    assert.throws(() => loadTrustedKey(keysA.privateKey), { code: 'E_KEY_INVALID' })
  })

  it('a signed model verifies, and sigstore-js accepts the bundle as a key-signed DSSE bundle', async () => {
    const store = ModelStore.open({ home })
    try {
      await saveModel(store, 'good', { 'vocab/keys.txt': 'a b c\n' })
      const { bundle } = await signModel(store, 'good', keysA.privateKey)
      assert.equal(bundle.mediaType, 'application/vnd.dev.sigstore.bundle.v0.3+json')
      assert.equal(await outcome(store, 'good'), 'ok')
      const v = await verifyModel(store, store.get('good'), trustA)
      assert.equal(v.files, 2)
      assert.equal(v.signer, keysA.publicKey)
      // Parsed and checked by sigstore-js itself, with the public key as its trust material.
      const parsed = bundleFromJSON(JSON.parse(storedSignature(store, store.get('good'))!))
      assert.ok(isBundleWithPublicKey(parsed) && isBundleWithDsseEnvelope(parsed))
      const key = createPublicKey(readFileSync(keysA.publicKey))
      new Verifier(
        {
          certificateAuthorities: [],
          timestampAuthorities: [],
          tlogs: [],
          ctlogs: [],
          publicKey: () => ({ publicKey: key, validFor: () => true }),
        },
        { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 },
      ).verify(toSignedEntity(parsed))
    } finally {
      store.close()
    }
  })

  it('verifies outside modelbundle: openssl checks the signature over the DSSE PAE, Python every digest', async () => {
    const store = ModelStore.open({ home })
    try {
      await saveModel(store, 'independent', { 'b.txt': 'second file\n', 'a/c.txt': 'third\n' })
      await signModel(store, 'independent', keysA.privateKey)
      const sig = JSON.parse(storedSignature(store, store.get('independent'))!)
      const out = join(dir, 'independent')
      mkdirSync(out)
      const payload = Buffer.from(sig.dsseEnvelope.payload, 'base64')
      const type = sig.dsseEnvelope.payloadType as string
      // DSSE v1 pre-authentication encoding, written out by hand here.
      writeFileSync(
        join(out, 'pae.bin'),
        Buffer.concat([Buffer.from(`DSSEv1 ${type.length} ${type} ${payload.length} `), payload]),
      )
      writeFileSync(join(out, 'sig.der'), Buffer.from(sig.dsseEnvelope.signatures[0].sig, 'base64'))
      const verified = execFileSync(
        'openssl',
        ['dgst', '-sha256', '-verify', keysA.publicKey, '-signature', join(out, 'sig.der'), join(out, 'pae.bin')],
        { encoding: 'utf8' },
      )
      assert.match(verified, /Verified OK/)
      // The statement's digests, recomputed from the files as `bundle models get -o path` lays them out.
      const modelDir = (await store.paths('independent')).dir
      writeFileSync(join(out, 'statement.json'), payload)
      const check = execFileSync(
        'python3',
        [
          '-c',
          `
import hashlib, json, os, sys
st = json.load(open(sys.argv[1]))
root = sys.argv[2]
assert st["_type"] == "https://in-toto.io/Statement/v1"
assert st["predicateType"] == "https://model_signing/signature/v1.0"
res = st["predicate"]["resources"]
files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
assert [r["name"] for r in res] == sorted(files, key=lambda p: p.split("/")), (res, files)
for r in res:
    assert r["digest"] == hashlib.sha256(open(os.path.join(root, r["name"]), "rb").read()).hexdigest(), r
subject = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in res)).hexdigest()
assert st["subject"][0]["digest"]["sha256"] == subject
print("digests ok", len(res))
`,
          join(out, 'statement.json'),
          modelDir,
        ],
        { encoding: 'utf8' },
      )
      assert.match(check, /digests ok 3/)
    } finally {
      store.close()
    }
  })

  it('a tamper corpus is refused, each case with its own code', async () => {
    const store = ModelStore.open({ home: join(dir, 'tamper') })
    const signed = async (name: string, extra: Record<string, string> = {}) => {
      const m = await saveModel(store, name, extra)
      await signModel(store, m.tag, keysA.privateKey)
      return storedSignature(store, m)!
    }
    try {
      const codes: Record<string, string> = {}
      // One byte flipped in a stored model file (the blob the runner would open).
      const flip = await saveModel(store, 'flip')
      await signModel(store, 'flip', keysA.privateKey)
      const blob = store.blobs.path(flip.files[0]!.sha256)
      chmodSync(blob, 0o644)
      const bytes = readFileSync(blob)
      bytes[100] = bytes[100]! ^ 0xff
      writeFileSync(blob, bytes)
      codes.flipped = await outcome(store, 'flip')
      // A file added, removed or renamed: the signature of version 1 held by a changed copy.
      const base = await signed('files', { 'notes.txt': 'notes\n' })
      const d = join(dir, 'changed')
      mkdirSync(join(d, 'added'), { recursive: true })
      const onnx = readFileSync((await store.paths('files')).files['model.onnx']!)
      writeFileSync(join(d, 'added', 'model.onnx'), onnx)
      writeFileSync(join(d, 'added', 'notes.txt'), 'notes\n')
      writeFileSync(join(d, 'added', 'extra.bin'), 'more')
      const added = await store.save({ name: 'added', version: '1', paths: [join(d, 'added')] })
      putSignature(store, added.tag, base, '')
      codes.added = await outcome(store, 'added')
      mkdirSync(join(d, 'removed'))
      writeFileSync(join(d, 'removed', 'model.onnx'), onnx)
      const removed = await store.save({ name: 'removed', version: '1', paths: [join(d, 'removed')] })
      putSignature(store, removed.tag, base, '')
      codes.removed = await outcome(store, 'removed')
      mkdirSync(join(d, 'renamed'))
      writeFileSync(join(d, 'renamed', 'model.onnx'), onnx)
      writeFileSync(join(d, 'renamed', 'readme.txt'), 'notes\n')
      const renamed = await store.save({ name: 'renamed', version: '1', paths: [join(d, 'renamed')] })
      putSignature(store, renamed.tag, base, '')
      codes.renamed = await outcome(store, 'renamed')
      // The statement edited (a digest changed), the signature kept.
      const edited = await saveModel(store, 'edited')
      const sig = JSON.parse(await signed('edited-source'))
      const statement = JSON.parse(Buffer.from(sig.dsseEnvelope.payload, 'base64').toString('utf8'))
      statement.predicate.resources[0].digest = edited.files[0]!.sha256
      sig.dsseEnvelope.payload = Buffer.from(JSON.stringify(statement)).toString('base64')
      putSignature(store, edited.tag, JSON.stringify(sig), '')
      codes.statementEdited = await outcome(store, 'edited')
      // Signed by another key than the one trusted.
      const other = await saveModel(store, 'other-key')
      await signModel(store, other.tag, keysB.privateKey)
      codes.otherKey = await outcome(store, 'other-key')
      // A truncated signature.
      const cut = await saveModel(store, 'truncated')
      const whole = (await signModel(store, cut.tag, keysA.privateKey), storedSignature(store, cut)!)
      putSignature(store, cut.tag, whole.slice(0, Math.floor(whole.length / 2)), '')
      codes.truncated = await outcome(store, 'truncated')
      // The signature of another model.
      const stranger = await saveModel(store, 'stranger')
      putSignature(store, stranger.tag, await signed('owner'), '')
      codes.anotherModel = await outcome(store, 'stranger')
      // Not signed at all.
      await saveModel(store, 'unsigned')
      codes.unsigned = await outcome(store, 'unsigned')
      assert.deepEqual(codes, {
        flipped: 'E_SIG_FILE_MODIFIED',
        added: 'E_SIG_FILE_ADDED',
        removed: 'E_SIG_FILE_MISSING',
        renamed: 'E_SIG_FILE_RENAMED',
        statementEdited: 'E_SIG_INVALID',
        otherKey: 'E_SIG_UNTRUSTED',
        truncated: 'E_SIG_MALFORMED',
        anotherModel: 'E_SIG_WRONG_MODEL',
        unsigned: 'E_SIG_UNSIGNED',
      })
      // The same signatures verify where nothing was changed, and under the key that made them.
      assert.equal(await outcome(store, 'files'), 'ok')
      assert.equal(await outcome(store, 'other-key', [loadTrustedKey(keysB.publicKey)]), 'ok')
    } finally {
      store.close()
    }
  })

  it('P-384 and P-521 keys made elsewhere sign and verify too (each hashed with its own digest)', async () => {
    const store = ModelStore.open({ home: join(dir, 'curves') })
    try {
      for (const namedCurve of ['secp384r1', 'secp521r1']) {
        const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve })
        const priv = join(dir, `${namedCurve}.pem`)
        const pub = join(dir, `${namedCurve}.pub.pem`)
        writeFileSync(priv, privateKey.export({ type: 'pkcs8', format: 'pem' }))
        writeFileSync(pub, publicKey.export({ type: 'spki', format: 'pem' }))
        const m = await saveModel(store, `curve-${namedCurve}`)
        await signModel(store, m.tag, priv)
        assert.equal(await outcome(store, m.tag, [loadTrustedKey(pub)]), 'ok', namedCurve)
        assert.equal(await outcome(store, m.tag, trustA), 'E_SIG_UNTRUSTED', namedCurve)
      }
    } finally {
      store.close()
    }
  })

  it('a file the signature does not list is refused even under a name model_signing ignores', async () => {
    const store = ModelStore.open({ home: join(dir, 'ignored') })
    try {
      const signed = await saveModel(store, 'plain')
      await signModel(store, signed.tag, keysA.privateKey)
      // The same files plus a .github/evil.onnx (sorted first: the file a runner would open).
      const d = join(dir, 'with-github')
      mkdirSync(join(d, '.github'), { recursive: true })
      const onnx = readFileSync((await store.paths('plain')).files['model.onnx']!)
      writeFileSync(join(d, 'model.onnx'), onnx)
      writeFileSync(join(d, '.github', 'evil.onnx'), onnx)
      const copy = await store.save({ name: 'with-github', version: '1', paths: [d] })
      putSignature(store, copy.tag, storedSignature(store, signed)!, '')
      assert.equal(await outcome(store, 'with-github'), 'E_SIG_FILE_ADDED')
    } finally {
      store.close()
    }
  })

  it('export and import carry the signature; it verifies in the other store', async () => {
    const store = ModelStore.open({ home })
    const other = ModelStore.open({ home: join(dir, 'other') })
    try {
      await saveModel(store, 'travels')
      await signModel(store, 'travels', keysA.privateKey)
      const { path } = await store.export('travels', join(dir, 'travels.bundlemodel'))
      await other.import(path)
      assert.equal(storedSignature(other, other.get('travels')), storedSignature(store, store.get('travels')))
      assert.equal(await outcome(other, 'travels'), 'ok')
      // A directory with its model.sig beside the files (as models get -o path lays it out, and
      // model_signing writes it) saves as the same model, signed: the signature is not a file of it.
      const { dir: laidOut, model } = await store.paths('travels')
      writeFileSync(join(laidOut, 'model.sig'), storedSignature(store, model)!)
      const copied = await other.save({ name: 'copied', version: '1', paths: [laidOut] })
      assert.equal(copied.digest, model.digest)
      assert.equal(storedSignature(other, copied), storedSignature(store, model))
      assert.equal(await outcome(other, 'copied'), 'ok')
    } finally {
      store.close()
      other.close()
    }
  })
})
