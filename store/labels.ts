import { BundleError } from '../errors/index.js'

export type Labels = Record<string, string>

const KEY = /^[A-Za-z0-9]([-._/A-Za-z0-9]*[A-Za-z0-9])?$/
const MAX_KEY = 63
const MAX_VALUE = 256
const MAX_METADATA_BYTES = 64 * 1024

export function validateLabel(key: string, value: string): void {
  if (key.length > MAX_KEY || !KEY.test(key)) {
    throw new BundleError(
      'E_STORE_LABEL_INVALID',
      `label key "${key}" must match [A-Za-z0-9]([-._/A-Za-z0-9]*[A-Za-z0-9])? and be at most ${MAX_KEY} characters`,
    )
  }
  if (typeof value !== 'string' || value.length > MAX_VALUE || /[\r\n\0]/.test(value)) {
    throw new BundleError(
      'E_STORE_LABEL_INVALID',
      `label "${key}": value must be a string of at most ${MAX_VALUE} characters without newlines`,
    )
  }
}

export function validateLabels(labels: unknown): Labels {
  if (labels === undefined) return {}
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new BundleError('E_STORE_LABEL_INVALID', 'labels must be an object of string values')
  }
  const out: Labels = {}
  for (const key of Object.keys(labels).sort()) {
    const value = (labels as Record<string, unknown>)[key]
    validateLabel(key, value as string)
    out[key] = value as string
  }
  return out
}

/**
 * Parses repeated `key=value` flags. A bare `key` is allowed when `allowBare` (filters:
 * "has this label, any value").
 */
export function parseLabelArgs(args: readonly string[], allowBare = false): Record<string, string | true> {
  const out: Record<string, string | true> = {}
  for (const arg of args) {
    const eq = arg.indexOf('=')
    if (eq < 0) {
      if (!allowBare) throw new BundleError('E_STORE_LABEL_INVALID', `label "${arg}" is not key=value`)
      validateLabel(arg, '')
      out[arg] = true
      continue
    }
    const key = arg.slice(0, eq)
    const value = arg.slice(eq + 1)
    validateLabel(key, value)
    if (Object.hasOwn(out, key)) throw new BundleError('E_STORE_LABEL_INVALID', `label "${key}" is given twice`)
    out[key] = value
  }
  return out
}

export function validateMetadata(metadata: unknown): Record<string, unknown> {
  if (metadata === undefined) return {}
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new BundleError('E_STORE_METADATA_INVALID', 'metadata must be a JSON object, e.g. {"source":"paddleocr"}')
  }
  let text: string
  try {
    text = JSON.stringify(metadata)
  } catch (cause) {
    throw new BundleError('E_STORE_METADATA_INVALID', 'metadata cannot be written as JSON', { cause })
  }
  if (Buffer.byteLength(text) > MAX_METADATA_BYTES) {
    throw new BundleError(
      'E_STORE_METADATA_INVALID',
      `metadata is ${Buffer.byteLength(text)} bytes as JSON; at most ${MAX_METADATA_BYTES} are allowed`,
    )
  }
  return JSON.parse(text) as Record<string, unknown>
}

export function parseMetadataArg(text: string): Record<string, unknown> {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new BundleError(
      'E_STORE_METADATA_INVALID',
      `--metadata is not valid JSON: ${text.length > 60 ? `${text.slice(0, 60)}…` : text}`,
    )
  }
  return validateMetadata(value)
}
