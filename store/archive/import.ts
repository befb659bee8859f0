import { createReadStream, statSync, statfsSync } from 'node:fs'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import { Parser, type ReadEntry } from 'tar'
import { BundleError, isBundleError } from '../../errors/index.js'
import type { StagedBlob } from '../blobs.js'
import { modelDigest } from '../digest.js'
import { isSafeModelPath } from '../model-path.js'
import type { ModelStore } from '../model-store.js'
import { readOnnxSignature } from '../onnx-signature.js'
import type { ImportStatus, ModelInfo, ProgressFn, Signatures } from '../types.js'
import { FILES_PREFIX, MANIFEST_NAME, MAX_MANIFEST_BYTES, parseManifest, type ArchiveManifest } from './manifest.js'

export interface ImportOptions {
  /** Replace a different model stored under the same tag. */
  force?: boolean
  onProgress?: ProgressFn
  /** Largest total of file bytes accepted (default $BUNDLE_IMPORT_MAX_BYTES or 64 GiB). */
  maxBytes?: number
}

const DEFAULT_MAX_BYTES = 64 * 1024 ** 3
// Headers, padding and the end-of-archive blocks a well-formed archive adds to its files.
const TAR_OVERHEAD_PER_ENTRY = 2048

export function importLimit(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.BUNDLE_IMPORT_MAX_BYTES)
  return Number.isSafeInteger(v) && v > 0 ? v : DEFAULT_MAX_BYTES
}

const unsafe = (msg: string) => new BundleError('E_ARCHIVE_UNSAFE_ENTRY', msg)

/**
 * Imports a `.bundlemodel`. Everything is checked before anything is committed: the manifest
 * (first entry), every entry's type and path, sizes against the manifest (so a gzip bomb stops
 * at the declared size), every sha256, and the model digest. Files are staged under the store's
 * temp directory by index, never by their archive path. A failure leaves the store unchanged.
 */
export async function importModel(store: ModelStore, file: string, options: ImportOptions = {}): Promise<{ model: ModelInfo; status: ImportStatus }> {
  let compressedTotal: number
  try {
    const st = statSync(file)
    if (!st.isFile()) throw new Error('not a file')
    compressedTotal = st.size
  } catch {
    throw new BundleError('E_STORE_FILE_NOT_FOUND', `${file}: no such archive file`)
  }
  const maxBytes = options.maxBytes ?? importLimit()
  let manifest: ArchiveManifest | undefined
  let failure: unknown
  const staged = new Map<string, Promise<StagedBlob>>()
  const seen = new Set<string>()
  let entries = 0
  let decompressed = 0
  let compressed = 0

  const source = createReadStream(file)
  // Aborts entry copies still waiting for data that will never come (truncated archive, early refusal).
  const abort = new AbortController()
  const fail = (err: unknown): void => {
    failure ??= err
    source.destroy()
    abort.abort()
  }

  const onEntry = (entry: ReadEntry): void => {
    entries++
    if (failure !== undefined) return void entry.resume()
    try {
      const path = entry.path
      if (entries === 1) {
        if (path !== MANIFEST_NAME || entry.type !== 'File') throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', `the first archive entry must be ${MANIFEST_NAME}, found ${JSON.stringify(path)}`)
        if ((entry.size ?? 0) > MAX_MANIFEST_BYTES) throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', `${MANIFEST_NAME} is larger than ${MAX_MANIFEST_BYTES} bytes`)
        const chunks: Buffer[] = []
        entry.on('data', (c: Buffer) => chunks.push(c))
        entry.on('end', () => {
          try {
            manifest = parseManifest(Buffer.concat(chunks).toString('utf8'), maxBytes)
            checkFreeSpace(store.layout.tmp, manifest.size)
          } catch (err) {
            fail(err)
          }
        })
        return
      }
      if (manifest === undefined) throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', 'the archive manifest could not be read')
      const trimmed = path.replace(/\/+$/, '')
      if (!isSafeModelPath(trimmed)) throw unsafe(`archive entry ${JSON.stringify(path)} is not a safe relative path`)
      if (entry.type === 'Directory') return void entry.resume() // harmless; files carry their own paths
      if (entry.type !== 'File') throw unsafe(`archive entry ${JSON.stringify(path)} is a ${entry.type}; only plain files are accepted`)
      if (seen.has(path)) throw unsafe(`archive entry ${JSON.stringify(path)} appears twice`)
      seen.add(path)
      const inModel = path.startsWith(FILES_PREFIX) ? path.slice(FILES_PREFIX.length) : undefined
      const declared = manifest.files.find((f) => f.path === inModel)
      if (declared === undefined) throw unsafe(`archive entry ${JSON.stringify(path)} is not listed in the manifest`)
      if (entry.size !== declared.size) throw new BundleError('E_ARCHIVE_CHECKSUM', `${declared.path}: the archive holds ${entry.size} bytes, the manifest declares ${declared.size}`)
      // ReadEntry is a Minipass stream; pipeline consumes it like a Readable.
      const job = store.blobs.stage(entry as unknown as Readable, undefined, declared.size, abort.signal)
      job.catch(fail)
      staged.set(declared.path, job)
    } catch (err) {
      entry.resume()
      fail(err)
    }
  }

  // Counts bytes after gunzip: more than the manifest allows means a bomb or trailing junk.
  const guard = new Transform({
    transform(chunk: Buffer, _enc, done) {
      decompressed += chunk.length
      const allowed = MAX_MANIFEST_BYTES + (manifest ? manifest.size + (manifest.files.length + 4) * TAR_OVERHEAD_PER_ENTRY : 64 * 1024)
      if (decompressed > allowed) return done(new BundleError('E_ARCHIVE_TOO_LARGE', `archive expands past ${allowed} bytes, more than its manifest declares`))
      done(null, chunk)
    },
  })
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      compressed += chunk.length
      options.onProgress?.({ phase: 'import', done: compressed, total: compressedTotal })
      done(null, chunk)
    },
  })

  const parser = new Parser({ strict: true, onReadEntry: onEntry })
  try {
    await pipeline(source, meter, createGunzip(), guard, parser).catch((err) => {
      throw failure ?? err
    })
    if (failure !== undefined) throw failure
    const settled = await Promise.allSettled(staged.values())
    const rejected = settled.find((s) => s.status === 'rejected')
    if (rejected) throw failure ?? (rejected as PromiseRejectedResult).reason
    if (manifest === undefined) throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', `${file} has no ${MANIFEST_NAME}`)
    const blobs: StagedBlob[] = []
    for (const f of manifest.files) {
      const job = staged.get(f.path)
      if (job === undefined) throw new BundleError('E_ARCHIVE_CORRUPT', `${f.path} is listed in the manifest but missing from the archive (truncated?)`)
      const blob = await job
      if (blob.size !== f.size || blob.sha256 !== f.sha256) throw new BundleError('E_ARCHIVE_CHECKSUM', `${f.path}: sha256 ${blob.sha256} does not match the manifest's ${f.sha256}`)
      blobs.push(blob)
    }
    if (modelDigest(manifest.files) !== manifest.digest) throw new BundleError('E_ARCHIVE_CHECKSUM', `model digest ${manifest.digest} does not match its files (${modelDigest(manifest.files)})`)
    // Signatures are re-read from the files, not trusted from the manifest.
    const signatures: Signatures = {}
    if (manifest.framework === 'onnx') {
      for (const [i, f] of manifest.files.entries()) if (f.path.endsWith('.onnx')) signatures[f.path] = await readOnnxSignature(blobs[i]!.tmpPath, f.path)
    }
    const { info, status } = await store.commit(
      {
        name: manifest.name,
        version: manifest.version,
        framework: manifest.framework,
        digest: manifest.digest,
        size: manifest.size,
        labels: manifest.labels,
        metadata: manifest.metadata,
        signatures,
        files: manifest.files,
        createdAt: Date.parse(manifest.created),
      },
      blobs,
      options.force ? 'replace' : 'same-digest-ok',
    )
    return { model: info, status }
  } catch (err) {
    source.destroy()
    abort.abort()
    const settled = await Promise.allSettled(staged.values())
    await store.blobs.discard(settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : [])))
    throw toArchiveError(err, file)
  }
}

function checkFreeSpace(dir: string, needed: number): void {
  try {
    const fs = statfsSync(dir)
    const free = Number(fs.bavail) * Number(fs.bsize)
    if (needed > free) throw new BundleError('E_STORE_NO_SPACE', `the archive needs ${needed} bytes, only ${free} are free under ${dir}`)
  } catch (err) {
    if (isBundleError(err)) throw err
  }
}

function toArchiveError(err: unknown, file: string): unknown {
  if (isBundleError(err)) return err
  const e = err as NodeJS.ErrnoException & { tarCode?: string }
  if (e?.code === 'Z_DATA_ERROR' || e?.code === 'Z_BUF_ERROR' || e?.code === 'ERR_STREAM_PREMATURE_CLOSE' || e?.tarCode !== undefined || /unexpected end|TAR_/.test(String(e?.message))) {
    return new BundleError('E_ARCHIVE_CORRUPT', `${file} is not a complete gzip tar archive (${e?.message ?? e})`, { cause: err })
  }
  if (e?.code === 'ENOSPC') return new BundleError('E_STORE_NO_SPACE', `no space left while importing ${file}`, { cause: err })
  return err
}
