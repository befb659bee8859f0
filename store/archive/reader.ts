import { createReadStream, statSync, statfsSync } from 'node:fs'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import type { ReadEntry } from 'tar'
import { BundleError, isBundleError } from '../../errors/index.js'
import type { StagedBlob } from '../blobs.js'
import { isSafeModelPath } from '../model-path.js'
import type { ModelStore } from '../model-store.js'
import type { ProgressFn } from '../types.js'
import { ARCHIVE_KINDS, MAX_MANIFEST_BYTES } from './manifest.js'

// Headers, padding and the end-of-archive blocks a well-formed archive adds to its files.
const TAR_OVERHEAD_PER_ENTRY = 2048

/** An archive entry its manifest declares: where it is in the archive, its size and sha256. */
export interface DeclaredEntry {
  entry: string
  size: number
  sha256: string
}

export interface ArchiveSpec<M> {
  /** The first entry's name (the manifest). */
  manifestName: string
  /** Validates the untrusted manifest; throws a coded error on anything unexpected. */
  parse: (text: string) => M
  /** Every other entry the archive must hold, from the manifest. */
  entries: (manifest: M) => readonly DeclaredEntry[]
  onProgress?: ProgressFn
}

const unsafe = (msg: string) => new BundleError('E_ARCHIVE_UNSAFE_ENTRY', msg)

/**
 * Reads a gzip tar whose first entry is a manifest declaring every other entry. Everything is
 * checked while streaming: entry types and paths, sizes against the manifest (so a gzip bomb
 * stops at the declared size), duplicates, and every sha256. Entries are staged under the
 * store's temp directory by content, never by their archive path. On failure nothing staged
 * survives; on success the caller owns the staged files (commit or discard them).
 */
export async function readArchive<M>(
  store: ModelStore,
  file: string,
  spec: ArchiveSpec<M>,
): Promise<{ manifest: M; staged: Map<string, StagedBlob> }> {
  let compressedTotal: number
  try {
    const st = statSync(file)
    if (!st.isFile()) throw new Error('not a file')
    compressedTotal = st.size
  } catch {
    throw new BundleError('E_STORE_FILE_NOT_FOUND', `${file}: no such archive file`)
  }
  return new ArchiveRead(store, file, spec, compressedTotal).run()
}

/** One read of an archive: what it has seen so far, and the first failure (which stops everything). */
class ArchiveRead<M> {
  private manifest: M | undefined
  private declared: Map<string, DeclaredEntry> | undefined
  private declaredBytes = 0
  private failure: unknown
  private readonly staged = new Map<string, Promise<StagedBlob>>()
  private entries = 0
  private readonly source
  /** Aborts entry copies still waiting for data that will never come (truncated archive, early refusal). */
  private readonly abort = new AbortController()

  constructor(
    private readonly store: ModelStore,
    private readonly file: string,
    private readonly spec: ArchiveSpec<M>,
    private readonly compressedTotal: number,
  ) {
    this.source = createReadStream(file)
  }

  private fail(err: unknown): void {
    this.failure ??= err
    this.source.destroy()
    this.abort.abort()
  }

  async run(): Promise<{ manifest: M; staged: Map<string, StagedBlob> }> {
    // tar loads on first use: the server process reads no archive (docs/defaults.md, "What the API process loads").
    const { Parser } = await import('tar')
    const parser = new Parser({ strict: true, onReadEntry: (e) => this.onEntry(e) })
    try {
      await pipeline(this.source, this.meter(), createGunzip(), this.guard(), parser).catch((err) => {
        throw this.failure ?? err
      })
      if (this.failure !== undefined) throw this.failure
      return await this.checked()
    } catch (err) {
      this.source.destroy()
      this.abort.abort()
      const settled = await Promise.allSettled(this.staged.values())
      await this.store.blobs.discard(settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : [])))
      throw toArchiveError(err, this.file)
    }
  }

  private onEntry(entry: ReadEntry): void {
    this.entries++
    if (this.failure !== undefined) return void entry.resume()
    try {
      if (this.entries === 1) this.readManifest(entry)
      else this.stage(entry)
    } catch (err) {
      entry.resume()
      this.fail(err)
    }
  }

  /** The first entry: the manifest, bounded in size, parsed and checked against the free space it needs. */
  private readManifest(entry: ReadEntry): void {
    const { spec } = this
    if (entry.path !== spec.manifestName || entry.type !== 'File')
      throw wrongFirstEntry(this.file, entry.path, spec.manifestName)
    if ((entry.size ?? 0) > MAX_MANIFEST_BYTES)
      throw new BundleError(
        'E_ARCHIVE_MANIFEST_INVALID',
        `${spec.manifestName} is larger than ${MAX_MANIFEST_BYTES} bytes`,
      )
    const chunks: Buffer[] = []
    entry.on('data', (c: Buffer) => chunks.push(c))
    entry.on('end', () => {
      try {
        this.manifest = spec.parse(Buffer.concat(chunks).toString('utf8'))
        this.declared = new Map(spec.entries(this.manifest).map((d) => [d.entry, d]))
        this.declaredBytes = [...this.declared.values()].reduce((n, d) => n + d.size, 0)
        checkFreeSpace(this.store.layout.tmp, this.declaredBytes)
      } catch (err) {
        this.fail(err)
      }
    })
  }

  /** Any other entry: a plain file at a safe path, declared once with this size, staged by content. */
  private stage(entry: ReadEntry): void {
    const path = entry.path
    if (this.declared === undefined)
      throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', 'the archive manifest could not be read')
    const trimmed = path.replace(/\/+$/, '')
    if (!isSafeModelPath(trimmed)) throw unsafe(`archive entry ${JSON.stringify(path)} is not a safe relative path`)
    if (entry.type === 'Directory') return void entry.resume() // harmless; files carry their own paths
    if (entry.type !== 'File')
      throw unsafe(`archive entry ${JSON.stringify(path)} is a ${entry.type}; only plain files are accepted`)
    if (this.staged.has(path)) throw unsafe(`archive entry ${JSON.stringify(path)} appears twice`)
    const d = this.declared.get(path)
    if (d === undefined) throw unsafe(`archive entry ${JSON.stringify(path)} is not listed in the manifest`)
    if (entry.size !== d.size)
      throw new BundleError(
        'E_ARCHIVE_CHECKSUM',
        `${path}: the archive holds ${entry.size} bytes, the manifest declares ${d.size}`,
      )
    // ReadEntry is a Minipass stream; pipeline consumes it like a Readable.
    const job = this.store.blobs.stage(entry as unknown as Readable, undefined, d.size, this.abort.signal)
    job.catch((err: unknown) => this.fail(err))
    this.staged.set(path, job)
  }

  /** Counts bytes after gunzip: more than the manifest allows means a bomb or trailing junk. */
  private guard(): Transform {
    let decompressed = 0
    return new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        decompressed += chunk.length
        const d = this.declared
        const allowed =
          MAX_MANIFEST_BYTES + (d ? this.declaredBytes + (d.size + 4) * TAR_OVERHEAD_PER_ENTRY : 64 * 1024)
        if (decompressed > allowed)
          return done(
            new BundleError(
              'E_ARCHIVE_TOO_LARGE',
              `archive expands past ${allowed} bytes, more than its manifest declares`,
            ),
          )
        done(null, chunk)
      },
    })
  }

  /** Reports progress in compressed bytes read. */
  private meter(): Transform {
    let compressed = 0
    return new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        compressed += chunk.length
        this.spec.onProgress?.({ phase: 'import', done: compressed, total: this.compressedTotal })
        done(null, chunk)
      },
    })
  }

  /** Every declared entry present, staged, and with the size and sha256 the manifest gives. */
  private async checked(): Promise<{ manifest: M; staged: Map<string, StagedBlob> }> {
    const settled = await Promise.allSettled(this.staged.values())
    const rejected = settled.find((s) => s.status === 'rejected')
    if (rejected) throw this.failure ?? (rejected as PromiseRejectedResult).reason
    const { manifest, declared } = this
    if (manifest === undefined || declared === undefined)
      throw new BundleError('E_ARCHIVE_MANIFEST_INVALID', `${this.file} has no ${this.spec.manifestName}`)
    const out = new Map<string, StagedBlob>()
    for (const d of declared.values()) {
      const job = this.staged.get(d.entry)
      if (job === undefined)
        throw new BundleError(
          'E_ARCHIVE_CORRUPT',
          `${d.entry} is listed in the manifest but missing from the archive (truncated?)`,
        )
      const blob = await job
      if (blob.size !== d.size || blob.sha256 !== d.sha256)
        throw new BundleError(
          'E_ARCHIVE_CHECKSUM',
          `${d.entry}: sha256 ${blob.sha256} does not match the manifest's ${d.sha256}`,
        )
      out.set(d.entry, blob)
    }
    return { manifest, staged: out }
  }
}

/** An archive of the other kind names the command that imports it; anything else says what was expected. */
function wrongFirstEntry(file: string, first: string, expected: string): BundleError {
  const found = ARCHIVE_KINDS[first]
  const wanted = ARCHIVE_KINDS[expected]
  if (found !== undefined && wanted !== undefined && found !== wanted)
    return new BundleError(
      'E_ARCHIVE_MANIFEST_INVALID',
      `${file} is ${found.kind}, not ${wanted.kind}: import it with \`${found.importCommand} ${shellArg(file)}\``,
    )
  return new BundleError(
    'E_ARCHIVE_MANIFEST_INVALID',
    `the first archive entry must be ${expected}, found ${JSON.stringify(first)}` +
      (wanted ? `: ${file} is not ${wanted.kind}` : ''),
  )
}

/** A path as a shell word, quoted only when it must be (the hint is pasted into a shell). */
const shellArg = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`)

function checkFreeSpace(dir: string, needed: number): void {
  try {
    const fs = statfsSync(dir)
    const free = Number(fs.bavail) * Number(fs.bsize)
    if (needed > free)
      throw new BundleError('E_STORE_NO_SPACE', `the archive needs ${needed} bytes, only ${free} are free under ${dir}`)
  } catch (err) {
    if (isBundleError(err)) throw err
  }
}

function toArchiveError(err: unknown, file: string): unknown {
  if (isBundleError(err)) return err
  const e = err as NodeJS.ErrnoException & { tarCode?: string }
  if (
    e?.code === 'Z_DATA_ERROR' ||
    e?.code === 'Z_BUF_ERROR' ||
    e?.code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    e?.tarCode !== undefined ||
    /unexpected end|TAR_/.test(String(e?.message))
  ) {
    return new BundleError('E_ARCHIVE_CORRUPT', `${file} is not a complete gzip tar archive (${e?.message ?? e})`, {
      cause: err,
    })
  }
  if (e?.code === 'ENOSPC')
    return new BundleError('E_STORE_NO_SPACE', `no space left while importing ${file}`, { cause: err })
  return err
}
