import semver from 'semver'
import { BundleError } from '../errors/index.js'

/** Names and versions: lower case, start and end alphanumeric, at most 63 characters. */
const PART = /^[a-z0-9]([-._a-z0-9]*[a-z0-9])?$/
/**
 * Model names may also have upper case, as Triton's model names do (test_cast_FLOAT_to_DOUBLE):
 * they are compared exactly (test_elu and test_ELU are two models, as two directories are for Triton).
 * Bundle names stay lower case (they become image names), and so do versions.
 */
const MODEL_NAME = /^[A-Za-z0-9]([-._A-Za-z0-9]*[A-Za-z0-9])?$/

/** How names of a kind are spelled: models may use upper case, bundles may not. */
export interface NameRule {
  mixedCase: boolean
}
export const MODEL_NAMES: NameRule = { mixedCase: true }
export const BUNDLE_NAMES: NameRule = { mixedCase: false }
// A version in a lookup may be a prefix of a stored version, so it may end in "-", "." or "_".
const PREFIX = /^[a-z0-9][-._a-z0-9]*$/
export const MAX_PART_LENGTH = 63

/** What a tag asks for: the newest version, an exact version (or unique prefix), or a semver range. */
export type TagQuery =
  | { readonly name: string; readonly kind: 'latest' }
  | { readonly name: string; readonly kind: 'version'; readonly version: string }
  | { readonly name: string; readonly kind: 'range'; readonly range: string }

function checkPart(what: 'name' | 'version', value: string, tag: string, pattern: RegExp = PART): void {
  if (value.length === 0) throw new BundleError('E_STORE_TAG_INVALID', `tag "${tag}" has an empty ${what}`)
  if (value.length > MAX_PART_LENGTH) {
    throw new BundleError(
      'E_STORE_TAG_INVALID',
      `tag "${tag}": ${what} is ${value.length} characters, at most ${MAX_PART_LENGTH} are allowed`,
    )
  }
  if (pattern.test(value)) return
  if (pattern.test(value.toLowerCase())) {
    // Upper case is refused, not lowered: two spellings of one tag would otherwise both "work".
    throw new BundleError(
      'E_STORE_TAG_INVALID',
      `tag "${tag}": ${what} "${value}" has upper-case letters; ${what === 'name' ? 'bundle names' : 'versions'} are ` +
        `lower case (did you mean "${value.toLowerCase()}"?)`,
    )
  }
  throw new BundleError(
    'E_STORE_TAG_INVALID',
    `tag "${tag}": ${what} "${value}" must match ${pattern.source.slice(1, -1)}`,
  )
}

export function validateName(name: string, rule: NameRule = BUNDLE_NAMES): string {
  checkPart('name', name, name, rule.mixedCase ? MODEL_NAME : PART)
  return name
}

/** A version a user chooses when saving; "latest" is reserved because it means "newest". */
export function validateVersion(version: string, name = '?'): string {
  checkPart('version', version, `${name}:${version}`)
  if (version === 'latest')
    throw new BundleError(
      'E_STORE_TAG_INVALID',
      `"latest" is reserved (it means the newest version); choose another version for ${name}`,
    )
  return version
}

/**
 * Parses `name`, `name:latest`, `name:version-or-prefix` or `name@<semver range>`.
 *
 * @example
 * parseTag('ocr-det@^1.2') // { name: 'ocr-det', kind: 'range', range: '^1.2' }
 */
export function parseTag(tag: string, rule: NameRule = BUNDLE_NAMES): TagQuery {
  const namePattern = rule.mixedCase ? MODEL_NAME : PART
  if (typeof tag !== 'string' || tag.trim() === '')
    throw new BundleError('E_STORE_TAG_INVALID', 'empty tag: give name[:version] or name@<semver range>')
  const at = tag.indexOf('@')
  if (at >= 0) {
    const name = tag.slice(0, at)
    const range = tag.slice(at + 1)
    checkPart('name', name, tag, namePattern)
    if (range.trim() === '' || semver.validRange(range) === null) {
      throw new BundleError(
        'E_STORE_TAG_INVALID',
        `tag "${tag}": "${range}" is not a valid semver range (e.g. ^1.2, ~1.2.3, >=1.0.0 <2)`,
      )
    }
    return { name, kind: 'range', range }
  }
  const parts = tag.split(':')
  if (parts.length > 2)
    throw new BundleError('E_STORE_TAG_INVALID', `tag "${tag}" has more than one ":"; write name[:version]`)
  const [name = '', version] = parts
  checkPart('name', name, tag, namePattern)
  if (version === undefined || version === 'latest') return { name, kind: 'latest' }
  checkPart('version', version, tag, PREFIX)
  return { name, kind: 'version', version }
}

export const formatTag = (name: string, version: string): string => `${name}:${version}`

/**
 * The command that stores a model so that `tag` finds it, for error hints a user can paste:
 * `bundle models save path/to/model.onnx --name NAME [--version V]` (a version only when the tag
 * names an exact one). `path` stands for the user's own file.
 */
export function saveCommand(tag: string, path = 'path/to/model.onnx'): string {
  let q: TagQuery
  try {
    q = parseTag(tag, MODEL_NAMES)
  } catch {
    return `bundle models save ${path} --name NAME`
  }
  return `bundle models save ${path} --name ${q.name}${q.kind === 'version' ? ` --version ${q.version}` : ''}`
}
