import { ignore } from '../../errors/index.js'
import { createHash } from 'node:crypto'
import { deserialize, serialize } from 'node:v8'
import type { RedisLink } from './link.js'

/** The response cache of one runner (opt in with `cache:` on the runner). */
export interface CacheOptions {
  /** How long an answer stays (default 300 000 ms, five minutes). */
  ttlMs?: number
  /** Answers larger than this are not kept (default 1 MiB): one huge output cannot crowd out the rest. */
  maxEntryBytes?: number
}

interface Tensorish {
  dtype: string
  shape: number[]
  data: ArrayBufferView | string[]
}

/**
 * Answers kept in Redis, keyed by the model's content digest and a hash of the request's
 * tensors (names, dtypes, shapes, bytes): the same input to the same model version gets the
 * same bytes back without queueing, from any replica. A cache that cannot be reached is a miss,
 * never an error. Redis bounds the whole cache (maxmemory with an LRU policy); this bounds
 * each entry and its lifetime.
 */
export class ResponseCache {
  private readonly ttlMs: number
  private readonly maxEntryBytes: number

  constructor(
    private readonly link: RedisLink,
    options: CacheOptions,
  ) {
    this.ttlMs = options.ttlMs ?? 300_000
    this.maxEntryBytes = options.maxEntryBytes ?? 1024 * 1024
  }

  key(modelDigest: string, inputs: Record<string, Tensorish>): string {
    const h = createHash('sha256')
    for (const name of Object.keys(inputs).sort()) {
      const t = inputs[name]!
      h.update(`${name}\0${t.dtype}\0${t.shape.join(',')}\0`)
      if (Array.isArray(t.data)) for (const s of t.data) h.update(`${s.length}:${s}`)
      else h.update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))
    }
    return `${this.link.prefix}:cache:${modelDigest.replace(/^sha256:/, '')}:${h.digest('hex')}`
  }

  async get<T>(key: string): Promise<T | undefined> {
    if (this.link.unavailable() !== undefined) return undefined
    try {
      const bytes = await this.link.client().getBuffer(key)
      return bytes === null ? undefined : (deserialize(bytes) as T)
    } catch {
      return undefined
    }
  }

  /** Stores an answer (in the background: the caller does not wait for Redis). */
  set(key: string, value: unknown): void {
    if (this.link.unavailable() !== undefined) return
    const bytes = serialize(value)
    if (bytes.byteLength > this.maxEntryBytes) return
    this.link.client().set(key, bytes, 'PX', this.ttlMs).catch(ignore('a cache entry not written is a miss next time'))
  }
}
