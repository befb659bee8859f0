import { BundleError } from '../../errors/index.js'
import { type CacheOptions, ResponseCache } from '../remote/cache.js'
import type { RedisLink } from '../remote/link.js'
import type { RunnerTensor } from '../tensor.js'

type Tensors = Record<string, RunnerTensor>

/** A runner's response cache, when its options ask for one; it lives in the server's Redis. */
export function openResponseCache(
  runner: string,
  option: CacheOptions | boolean | undefined,
  redis: RedisLink | undefined,
): ResponseCache | undefined {
  if (!option) return undefined
  if (redis === undefined) {
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `runner ${runner} keeps a response cache, which lives in Redis: ` +
        'serve with --redis redis://HOST:6379 (or BUNDLE_REDIS_URL), or drop its cache option',
    )
  }
  return new ResponseCache(redis, option === true ? {} : option)
}

/** A hit skips the queue; a miss runs `submit` and keeps its answer. `looked` hears which it was. */
export async function throughCache(
  cache: ResponseCache,
  digest: string,
  inputs: Tensors,
  submit: (inputs: Tensors) => Promise<Tensors>,
  looked: (hit: boolean) => void,
): Promise<Tensors> {
  const key = cache.key(digest, inputs)
  const hit = await cache.get<Tensors>(key)
  looked(hit !== undefined)
  if (hit !== undefined) return hit
  const out = await submit(inputs)
  cache.set(key, out)
  return out
}
