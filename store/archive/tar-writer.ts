import type { Writable } from 'node:stream'

const BLOCK = 512

/**
 * Writes a ustar stream entry by entry with fixed owner, mode and mtime, so the same model
 * always yields the same bytes (node-tar's Pack reads modes and times from the disk, and
 * turns two entries sharing a blob into a hard link, which our own import refuses).
 */
export class TarWriter {
  constructor(
    private readonly out: Writable,
    private readonly mtime: Date,
  ) {}

  private async write(chunk: Buffer): Promise<void> {
    if (!this.out.write(chunk)) await new Promise<void>((resolve) => this.out.once('drain', resolve))
  }

  /** Writes one file entry's header; the caller then streams exactly `size` bytes through `data`. */
  async begin(path: string, size: number): Promise<void> {
    const fields = {
      path,
      size,
      mode: 0o644,
      uid: 0,
      gid: 0,
      uname: '',
      gname: '',
      mtime: this.mtime,
      type: 'File' as const,
    }
    // tar loads on first use: the server process writes no archive.
    const { Header, Pax } = await import('tar')
    const header = new Header(fields)
    const block = Buffer.alloc(BLOCK)
    if (header.encode(block, 0)) {
      // Paths over 100 bytes need a PAX extended header in front.
      await this.write(new Pax({ path, size, mtime: this.mtime }).encode())
      const short = new Header({ ...fields, path: path.slice(-99) })
      short.encode(block, 0)
    }
    await this.write(block)
  }

  async data(chunk: Buffer): Promise<void> {
    await this.write(chunk)
  }

  async end(size: number): Promise<void> {
    const pad = (BLOCK - (size % BLOCK)) % BLOCK
    if (pad) await this.write(Buffer.alloc(pad))
  }

  async file(path: string, body: Buffer): Promise<void> {
    await this.begin(path, body.length)
    await this.data(body)
    await this.end(body.length)
  }

  /** Two zero blocks close a tar archive. */
  async finish(): Promise<void> {
    await this.write(Buffer.alloc(BLOCK * 2))
  }
}
