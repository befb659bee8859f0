import { createHash } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import { Header } from 'tar'
import { modelDigest } from '../../store/digest.js'

export type EntryType = 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO'

export interface RawEntry {
  path: string
  type?: EntryType
  body?: Buffer | string
  linkpath?: string
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

/** Builds a raw tar with whatever entries a test wants, hostile ones included. */
export function makeTar(entries: readonly RawEntry[], trailing = Buffer.alloc(1024)): Buffer {
  const parts: Buffer[] = []
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '')
    const type = e.type ?? 'File'
    const header = new Header({
      path: e.path,
      type,
      size: type === 'File' ? body.length : 0,
      mode: 0o644,
      mtime: new Date(0),
      linkpath: e.linkpath,
      uid: 0,
      gid: 0,
    })
    const block = Buffer.alloc(512)
    header.encode(block, 0)
    parts.push(block)
    if (type === 'File') {
      parts.push(body, Buffer.alloc((512 - (body.length % 512)) % 512))
    }
  }
  parts.push(trailing)
  return Buffer.concat(parts)
}

export interface FileSpec {
  path: string
  body: Buffer | string
}

/** A manifest as `bundle models export` writes it, with fields a test may override. */
export function manifest(files: readonly FileSpec[], overrides: Record<string, unknown> = {}): string {
  const list = files.map((f) => ({ path: f.path, sha256: sha(Buffer.from(f.body)), size: Buffer.from(f.body).length }))
  return JSON.stringify({
    kind: 'modelbundle/model',
    formatVersion: 1,
    name: 'evil',
    version: '1.0.0',
    framework: 'custom',
    digest: modelDigest(list),
    size: list.reduce((n, f) => n + f.size, 0),
    labels: {},
    metadata: {},
    signatures: {},
    created: '2026-01-01T00:00:00.000Z',
    files: list,
    ...overrides,
  })
}

/** A well-formed archive of `files`, gzipped. */
export function goodArchive(files: readonly FileSpec[]): Buffer {
  return gzipSync(
    makeTar([
      { path: 'manifest.json', body: manifest(files) },
      ...files.map((f) => ({ path: `files/${f.path}`, body: f.body })),
    ]),
  )
}

export { gzipSync as gzip }
