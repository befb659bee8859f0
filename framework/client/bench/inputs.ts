import { readdirSync, readFileSync, statSync } from 'node:fs'
import { extname, join } from 'node:path'
import { BundleError } from '../../../errors/index.js'

/** One request body for a service API, with its headers. */
export interface Payload {
  body: Uint8Array
  headers: Record<string, string>
}

/** One input tensor of a model request: raw little-endian bytes. */
export interface TensorInput {
  name: string
  datatype: string
  shape: number[]
  bytes: Uint8Array
}

const TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.json': 'application/json',
  '.txt': 'text/plain',
  '.wav': 'audio/wav',
  '.bin': 'application/octet-stream',
  '.npy': 'application/octet-stream',
}

/** The bodies `--input` names: a file, or every file of a directory (sent in turn). */
export function filePayloads(path: string, contentType?: string): Payload[] {
  let files: string[]
  try {
    files = statSync(path).isDirectory()
      ? readdirSync(path)
          .filter((f) => !f.startsWith('.'))
          .sort()
          .map((f) => join(path, f))
          .filter((f) => statSync(f).isFile())
      : [path]
  } catch {
    throw new BundleError('E_CLI_USAGE', `--input ${path}: no such file or directory`)
  }
  if (files.length === 0) throw new BundleError('E_CLI_USAGE', `--input ${path}: the directory holds no files`)
  return files.map((f) => {
    const type = contentType ?? TYPES[extname(f).toLowerCase()]
    if (type === undefined)
      throw new BundleError(
        'E_CLI_USAGE',
        `--input ${f}: cannot tell its media type from "${extname(f) || '(no extension)'}"; pass --content-type`,
      )
    return { body: readFileSync(f), headers: { 'content-type': type } }
  })
}

const SIZES: Record<string, number> = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
}

/**
 * Random values of a datatype (floats in [0, 1), integers 0–9, half floats and booleans as
 * 0/1 patterns): the work of a real request of that shape without a dataset.
 */
export function randomTensor(name: string, datatype: string, shape: number[]): TensorInput {
  const size = SIZES[datatype]
  if (size === undefined)
    throw new BundleError('E_CLI_USAGE', `input "${name}" is ${datatype}: random data needs a numeric datatype`)
  const count = shape.reduce((n, d) => n * d, 1)
  const bytes = new Uint8Array(count * size)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < count; i++) {
    const at = i * size
    if (datatype === 'FP32') view.setFloat32(at, Math.random(), true)
    else if (datatype === 'FP64') view.setFloat64(at, Math.random(), true)
    else if (datatype === 'FP16')
      view.setUint16(at, 0x3800, true) // 0.5
    else if (datatype === 'BOOL') bytes[at] = Math.random() < 0.5 ? 0 : 1
    else if (size === 8) view.setBigInt64(at, BigInt(Math.floor(Math.random() * 10)), true)
    else bytes[at] = Math.floor(Math.random() * 10)
  }
  return { name, datatype, shape, bytes }
}

/** A tensor body for a service API that takes io.tensor(): FP32 bytes and the shape header. */
export function tensorPayload(shape: number[]): Payload {
  const t = randomTensor('body', 'FP32', shape)
  return { body: t.bytes, headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': shape.join(',') } }
}

/** `1,3,48,192` → [1, 3, 48, 192]. */
export function parseShape(text: string): number[] {
  const dims = text.split(',').map((d) => Number(d.trim()))
  if (dims.length === 0 || dims.some((d) => !Number.isSafeInteger(d) || d < 1))
    throw new BundleError('E_CLI_USAGE', `--shape "${text}" must be positive whole numbers separated by commas`)
  return dims
}
