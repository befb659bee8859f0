import { ignore } from '../errors/index.js'
import { createHash } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  fsyncSync,
  openSync,
  closeSync,
  chmodSync,
  renameSync,
  mkdirSync,
} from 'node:fs'
import { unlink } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fsyncDir, ioError, tempName } from './fs-util.js'

const HEX64 = /^[0-9a-f]{64}$/

/** A file hashed into the temp area, not yet placed among the blobs. */
export interface StagedBlob {
  sha256: string
  size: number
  tmpPath: string
}

/** Content-addressed files: `blobs/sha256/<2 hex>/<64 hex>`, read-only, each stored once. */
export class BlobStore {
  constructor(
    readonly root: string,
    readonly tmpDir: string,
  ) {}

  path(sha256: string): string {
    if (!HEX64.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`)
    return join(this.root, sha256.slice(0, 2), sha256)
  }

  has(sha256: string): boolean {
    return existsSync(this.path(sha256))
  }

  /**
   * Copies a stream into the temp area while hashing it. `limit` aborts the copy as soon as
   * more bytes arrive than declared (an archive entry lying about its size).
   */
  async stage(
    source: Readable,
    onBytes?: (n: number) => void,
    limit?: number,
    signal?: AbortSignal,
  ): Promise<StagedBlob> {
    mkdirSync(this.tmpDir, { recursive: true })
    const tmpPath = tempName(this.tmpDir, 'part')
    const hash = createHash('sha256')
    let size = 0
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length
        if (limit !== undefined && size > limit) return done(new RangeError(`more than ${limit} bytes`))
        hash.update(chunk)
        onBytes?.(chunk.length)
        done(null, chunk)
      },
    })
    try {
      await pipeline(source, meter, createWriteStream(tmpPath, { mode: 0o644 }), signal ? { signal } : {})
    } catch (err) {
      await unlink(tmpPath).catch(ignore('the temporary file may not exist'))
      throw err
    }
    return { sha256: hash.digest('hex'), size, tmpPath }
  }

  async stageFile(file: string, onBytes?: (n: number) => void): Promise<StagedBlob> {
    try {
      return await this.stage(createReadStream(file), onBytes)
    } catch (err) {
      throw ioError(err, `reading ${file}`)
    }
  }

  /**
   * Moves a staged file to its content address. The caller must hold a lease on the digest
   * (see ModelStore) so garbage collection cannot remove it before the index row commits.
   * When the blob already exists the staged copy is dropped and nothing is fsynced.
   */
  place(staged: StagedBlob): boolean {
    const target = this.path(staged.sha256)
    try {
      if (existsSync(target)) {
        void unlink(staged.tmpPath).catch(ignore('the temporary file may not exist'))
        return false
      }
      const fd = openSync(staged.tmpPath, 'r')
      try {
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
      chmodSync(staged.tmpPath, 0o444)
      mkdirSync(dirname(target), { recursive: true })
      renameSync(staged.tmpPath, target)
      fsyncDir(dirname(target))
      return true
    } catch (err) {
      throw ioError(err, `storing blob ${staged.sha256}`)
    }
  }

  async discard(staged: readonly StagedBlob[]): Promise<void> {
    await Promise.all(staged.map((s) => unlink(s.tmpPath).catch(ignore('the temporary files may not exist'))))
  }

  /** Re-hashes a stored blob; `missing` when the file is gone. */
  async check(sha256: string, size: number): Promise<'ok' | 'missing' | 'corrupt'> {
    const file = this.path(sha256)
    if (!existsSync(file)) return 'missing'
    const hash = createHash('sha256')
    let n = 0
    try {
      for await (const chunk of createReadStream(file)) {
        hash.update(chunk as Buffer)
        n += (chunk as Buffer).length
      }
    } catch {
      return 'corrupt'
    }
    return n === size && hash.digest('hex') === sha256 ? 'ok' : 'corrupt'
  }
}
