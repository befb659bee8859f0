import { createHash } from 'node:crypto'
import { BundleError } from '../../errors/index.js'

// The in-toto statement of an OMS v1.0 model signature (sigstore/model-transparency's
// model_signing): every file of the model with its sha256, and a subject whose digest is the
// sha256 over those digests' raw bytes, in the order listed.

export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1'
export const PREDICATE_TYPE = 'https://model_signing/signature/v1.0'
/** Names model_signing never hashes: the signature itself and version-control files. */
export const IGNORED_PATHS = ['model.sig', '.git', '.gitattributes', '.github', '.gitignore'] as const

/** One signed file: its path inside the model (POSIX) and the sha256 of its content. */
export interface Resource {
  name: string
  algorithm: 'sha256'
  digest: string
}

export interface Statement {
  _type: typeof STATEMENT_TYPE
  subject: { name: string; digest: { sha256: string } }[]
  predicateType: typeof PREDICATE_TYPE
  predicate: {
    serialization: { method: 'files'; hash_type: 'sha256'; allow_symlinks: false; ignore_paths: string[] }
    resources: Resource[]
  }
}

/** Path order as model_signing lists files (Python's PurePosixPath order: segment by segment). */
export function comparePaths(a: string, b: string): number {
  const x = a.split('/')
  const y = b.split('/')
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1
  return x.length - y.length
}

/** sha256 over the resources' raw digests, in their order: the statement's subject digest. */
export function subjectDigest(resources: readonly Resource[]): string {
  const h = createHash('sha256')
  for (const r of resources) h.update(Buffer.from(r.digest, 'hex'))
  return h.digest('hex')
}

/** The statement for a model named `name` whose files hash to `files` (path → sha256 hex). */
export function statementFor(name: string, files: ReadonlyMap<string, string>): Statement {
  const resources: Resource[] = [...files.keys()]
    .sort(comparePaths)
    .map((path) => ({ name: path, algorithm: 'sha256', digest: files.get(path)! }))
  return {
    _type: STATEMENT_TYPE,
    subject: [{ name, digest: { sha256: subjectDigest(resources) } }],
    predicateType: PREDICATE_TYPE,
    predicate: {
      serialization: { method: 'files', hash_type: 'sha256', allow_symlinks: false, ignore_paths: [...IGNORED_PATHS] },
      resources,
    },
  }
}

const malformed = (why: string) =>
  new BundleError('E_SIG_MALFORMED', `the signature's statement is not an OMS v1.0 model statement: ${why}`)

const HEX64 = /^[0-9a-f]{64}$/

/** Parses and checks a signed statement (its payload bytes): types, subject, every resource. */
export function readStatement(payload: Buffer): Statement {
  let s: unknown
  try {
    s = JSON.parse(payload.toString('utf8'))
  } catch {
    throw malformed('the payload is not JSON')
  }
  const st = s as Partial<Statement> | null
  if (st === null || typeof st !== 'object') throw malformed('the payload is not a JSON object')
  if (st._type !== STATEMENT_TYPE) throw malformed(`_type is ${JSON.stringify(st._type)}, not ${STATEMENT_TYPE}`)
  if (st.predicateType !== PREDICATE_TYPE)
    throw malformed(`predicateType is ${JSON.stringify(st.predicateType)}, not ${PREDICATE_TYPE}`)
  const resources = st.predicate?.resources
  if (!Array.isArray(resources) || resources.length === 0) throw malformed('predicate.resources lists no file')
  for (const r of resources)
    if (
      typeof r?.name !== 'string' ||
      r.name === '' ||
      r.name.startsWith('/') ||
      r.name.split('/').includes('..') ||
      r.algorithm !== 'sha256' ||
      typeof r.digest !== 'string' ||
      !HEX64.test(r.digest)
    )
      throw malformed(`a resource is not {name, algorithm: "sha256", digest: <64 hex>}: ${JSON.stringify(r)}`)
  if (new Set(resources.map((r) => r.name)).size !== resources.length) throw malformed('a file is listed twice')
  const subject = st.subject
  if (!Array.isArray(subject) || subject.length !== 1 || typeof subject[0]?.digest?.sha256 !== 'string')
    throw malformed('it needs exactly one subject with a sha256 digest')
  // Signed, so only a signer's own mistake makes these differ; model_signing refuses it too.
  if (subject[0].digest.sha256 !== subjectDigest(resources))
    throw malformed("the subject's digest is not the digest of the listed files")
  return st as Statement
}
