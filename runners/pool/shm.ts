import { randomBytes } from 'node:crypto'
import { closeSync, openSync, readSync, statSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { BundleError } from '../../errors/index.js'
import { isWireTensor } from './backend.js'
import { isGathered, joined, type ShmSlot } from './protocol.js'

/**
 * Tensor bytes between the API process and one worker through a shared-memory file (tmpfs,
 * /dev/shm) instead of the IPC socket. Sending 1.3 MB through child_process IPC costs a v8
 * serialisation, a socket copy in 64 KiB pieces with a wake-up each, a reassembly and a
 * deserialisation; through the file it is one write and one read (≈2× faster for 1 MiB measured here, see
 * bench:ipc). The threshold is the pipe's own capacity (64 KiB): a message larger than that
 * cannot go in one write, and in a server that is also answering HTTP each extra wake-up shows —
 * the quickstart's 110 KB input took 1.15 ms there and back inline, 0.78 ms through the file
 * (bench:served, one connection). Only the tensors' bytes move this way; the message itself
 * still goes over IPC, each such tensor's `data` empty, with a list of where their bytes are
 * (`shm`: ShmSlot[], each the tensor's path in the message, its offset and its length).
 *
 * Each call in flight on a worker has a region of its own (calls may be handed to a worker before
 * the previous one is answered: WorkerPool's depth), so the file needs no locking: the API process
 * writes a call's inputs into its region and sends the call; the worker reads them when the call's
 * turn comes, runs, writes its outputs into the same region and replies; the API process reads
 * them before the region goes to another call. Regions are REGION_BYTES apart in a sparse tmpfs
 * file: only the pages written take memory.
 * The file is unlinked as soon as both sides hold it open, so nothing is left behind even if a
 * process is SIGKILLed. A write that fails (a full /dev/shm: containers often give it 64 MB)
 * leaves that tensor inline in the message, which always works.
 */
export const SHM_MIN_BYTES = 64 * 1024

/**
 * The size from which a tensor goes through the file: BUNDLE_IPC_SHM_MIN_BYTES, else
 * SHM_MIN_BYTES. `npm run bench:ipc` measures both paths at each size (docs/defaults.md).
 */
export function shmMinBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.BUNDLE_IPC_SHM_MIN_BYTES
  if (raw === undefined || raw.trim() === '') return SHM_MIN_BYTES
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < 1)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `BUNDLE_IPC_SHM_MIN_BYTES must be a whole number of bytes, 1 or more; got ${JSON.stringify(raw)}`,
    )
  return n
}

/** Distance between two calls' regions: more than any one call's tensors (4 GiB). */
export const REGION_BYTES = 2 ** 32

/** Where shared-memory files go: /dev/shm when it exists (Linux), else nowhere (inline IPC). */
export function shmDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.BUNDLE_IPC_SHM === '0') return undefined
  try {
    return statSync('/dev/shm').isDirectory() ? '/dev/shm' : undefined
  } catch {
    return undefined
  }
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' &&
  v !== null &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)

/** Stands where a tensor's bytes were: they are in the file, at the place its ShmSlot says. */
const MOVED = new Uint8Array(0)

/** How deep into a message tensors are looked for (args.inputs.x sits at depth 2). */
const MAX_DEPTH = 4

export class ShmChannel {
  private constructor(
    private fd: number | undefined,
    readonly path: string,
    /** Tensors this size or more go through the file; smaller ones stay in the message. */
    readonly minBytes: number,
  ) {}

  /** API side: a new private file in `dir`, or undefined when it cannot be made. */
  static create(dir: string | undefined, label: string, minBytes = SHM_MIN_BYTES): ShmChannel | undefined {
    if (dir === undefined) return undefined
    const path = join(
      dir,
      `modelbundle-${process.pid}-${label.replace(/[^\w.-]/g, '_')}-${randomBytes(6).toString('hex')}`,
    )
    try {
      return new ShmChannel(openSync(path, 'wx+', 0o600), path, minBytes)
    } catch {
      return undefined
    }
  }

  /** Worker side: the file the API process made. */
  static open(path: string, minBytes = SHM_MIN_BYTES): ShmChannel {
    return new ShmChannel(openSync(path, 'r+'), path, minBytes)
  }

  /** Removes the name; the open descriptors keep the memory until both sides close. */
  unlink(): void {
    try {
      unlinkSync(this.path)
    } catch {
      // already gone
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd)
    this.fd = undefined
  }

  /**
   * A copy of `value` whose tensors of `minBytes` or more are written to `region` of the file;
   * their `data` is left empty in the copy and `slots` says where each one's bytes went (the
   * message carries both, so the other side reads exactly those — it never guesses from shapes).
   */
  encode(value: unknown, region = 0): { value: unknown; slots: ShmSlot[] } {
    const base = region * REGION_BYTES
    const slots: ShmSlot[] = []
    return { value: this.walkOut(value, { offset: base, end: base + REGION_BYTES }, [], slots), slots }
  }

  /**
   * A copy of `value` with every reference replaced by a tensor read from the file. By default
   * into fresh buffers; with `reuse`, into one scratch buffer kept between calls — valid only
   * until the next decode, for a caller done with its inputs by then (onnxruntime's run is).
   * Reading into memory already touched is ~20× faster here than into fresh memory, whose
   * page faults dominate the copy.
   */
  decode<T>(value: T, slots: readonly ShmSlot[] | undefined, reuse = false): T {
    if (slots === undefined || slots.length === 0) return value
    const at = reuse ? { offset: 0 } : undefined
    for (const slot of slots) {
      // `value` is the message as it arrived (a copy of its own): its tensors are filled in place.
      let holder: unknown = value
      for (const key of slot.path) holder = (holder as Record<string | number, unknown> | undefined)?.[key]
      if (typeof holder !== 'object' || holder === null)
        throw new Error(`shared-memory tensor at ${slot.path.join('.')} is not in the message`)
      ;(holder as { data: Uint8Array }).data = this.read(slot, at)
    }
    return value
  }

  private scratch: Buffer | undefined

  /**
   * `length` bytes at a 64-byte-aligned `at.offset` of the scratch buffer (grown, never shrunk):
   * onnxruntime reads inputs in place, and its results can depend on their alignment.
   */
  private scratchBytes(at: { offset: number }, length: number): Uint8Array {
    const start = at.offset
    at.offset = start + Math.ceil(length / 64) * 64
    if (this.scratch === undefined || this.scratch.byteLength < at.offset) {
      // Earlier views stay valid: they keep the old buffer alive.
      this.scratch = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(Math.max(at.offset, 1 << 20))))
    }
    return new Uint8Array(this.scratch.buffer, start, length)
  }

  private walkOut(
    v: unknown,
    at: { offset: number; end: number },
    path: (string | number)[],
    slots: ShmSlot[],
  ): unknown {
    if (isGathered(v)) {
      const length = v.parts.reduce((n, p) => n + p.byteLength, 0)
      if (length < this.minBytes || this.fd === undefined || at.offset + length > at.end) return joined(v)
      const offset = at.offset
      let pos = offset
      for (const p of v.parts) {
        if (!this.write(p, pos)) return joined(v)
        pos += p.byteLength
      }
      at.offset = offset + Math.ceil(length / 8) * 8
      slots.push({ path: [...path], offset, length })
      return { dtype: v.dtype, shape: v.shape, data: MOVED }
    }
    if (isWireTensor(v)) {
      // Past the region's end the bytes go inline (they would overwrite another call's).
      if (v.data.byteLength < this.minBytes || this.fd === undefined || at.offset + v.data.byteLength > at.end) return v
      const offset = at.offset
      if (!this.write(v.data, offset)) return v
      // 8-byte alignment keeps every typed array view of the next tensor valid.
      at.offset = offset + Math.ceil(v.data.byteLength / 8) * 8
      slots.push({ path: [...path], offset, length: v.data.byteLength })
      return { ...v, data: MOVED }
    }
    if (path.length >= MAX_DEPTH) return v
    if (Array.isArray(v))
      return v.some((x) => typeof x === 'object' && x !== null)
        ? v.map((x, i) => this.walkOut(x, at, [...path, i], slots))
        : v
    if (isPlain(v)) {
      const out: Record<string, unknown> = {}
      for (const [k, x] of Object.entries(v)) out[k] = this.walkOut(x, at, [...path, k], slots)
      return out
    }
    return v
  }

  /** One tensor's bytes from the file: into fresh memory, or into the scratch buffer at `at`. */
  private read(slot: ShmSlot, at: { offset: number } | undefined): Uint8Array {
    const { offset, length } = slot
    // Not zero-filled (every byte is read next); aligned for any dtype either way.
    const data = at ? this.scratchBytes(at, length) : new Uint8Array(Buffer.allocUnsafeSlow(length).buffer, 0, length)
    let done = 0
    while (done < length) {
      const n = readSync(this.fd!, data, done, length - done, offset + done)
      if (n === 0) throw new Error(`shared-memory tensor truncated at ${done} of ${length} bytes`)
      done += n
    }
    return data
  }

  /** false when the bytes did not fit (ENOSPC): the caller sends them inline. */
  private write(data: Uint8Array, offset: number): boolean {
    try {
      let done = 0
      while (done < data.byteLength) done += writeSync(this.fd!, data, done, data.byteLength - done, offset + done)
      return true
    } catch {
      return false
    }
  }
}
