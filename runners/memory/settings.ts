import { BundleError } from '../../errors/index.js'
import type { MemoryBudget } from './model-memory.js'
import type { PolicyName } from './policy.js'
import { parseBytes } from './size.js'

const bad = (msg: string) => new BundleError('E_SERVE_CONFIG_INVALID', msg)

/** Where each memory-budget setting may come from; the first given wins (flags, environment, file). */
export interface MemorySources {
  flags: { memoryBudget?: string; modelLoadConcurrency?: string; evictionPolicy?: string }
  env: NodeJS.ProcessEnv
  /** A serve config file's `models:` section (parsed YAML), and the file's name for messages. */
  file?: { doc: unknown; name: string } | undefined
}

const KEYS = ['memoryBudget', 'loadConcurrency', 'evictionPolicy', 'hosts'] as const

/** The `models:` section of a serve config file, checked. */
function fileSection(file: MemorySources['file']): Record<string, unknown> {
  const doc = file?.doc
  if (doc === null || typeof doc !== 'object' || !('models' in doc)) return {}
  const m = (doc as { models: unknown }).models
  if (m === null || typeof m !== 'object' || Array.isArray(m))
    throw bad(`${file!.name}: models must be a mapping (memoryBudget, loadConcurrency, evictionPolicy, hosts)`)
  for (const k of Object.keys(m))
    if (!(KEYS as readonly string[]).includes(k))
      throw bad(`${file!.name}: models.${k} is not a setting; use ${KEYS.join(', ')}`)
  return m as Record<string, unknown>
}

function count(what: string, v: unknown): number {
  const n = Number(v)
  if (!Number.isInteger(n) || n < 1 || String(v).trim() === '') throw bad(`${what} "${v}" must be a whole number ≥ 1`)
  return n
}

/**
 * The memory budget from `--memory-budget` / BUNDLE_MEMORY_BUDGET / serve.yaml `models.memoryBudget`
 * and its companions (load concurrency, eviction policy, model hosts); undefined when no budget is set.
 */
export function memorySettings(src: MemorySources): MemoryBudget | undefined {
  const f = fileSection(src.file)
  const where = (flag: string, env: string, key: string) => `${flag} (or ${env}, or models.${key} in the config file)`
  const pick = (flag: string | undefined, env: string, key: string): [unknown, string] | undefined => {
    if (flag !== undefined) return [flag, `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`]
    if (src.env[env]) return [src.env[env], env]
    if (f[key] !== undefined) return [f[key], `${src.file!.name}: models.${key}`]
    return undefined
  }
  const budget = pick(src.flags.memoryBudget, 'BUNDLE_MEMORY_BUDGET', 'memoryBudget')
  const concurrency = pick(src.flags.modelLoadConcurrency, 'BUNDLE_MODEL_LOAD_CONCURRENCY', 'loadConcurrency')
  const policy = pick(src.flags.evictionPolicy, 'BUNDLE_EVICTION_POLICY', 'evictionPolicy')
  const hosts = pick(undefined, 'BUNDLE_MODEL_HOSTS', 'hosts')
  if (budget === undefined) {
    const stray = concurrency ?? policy ?? hosts
    if (stray)
      throw bad(
        `${stray[1]} applies to models under a memory budget: set ` +
          where('--memory-budget', 'BUNDLE_MEMORY_BUDGET', 'memoryBudget'),
      )
    return undefined
  }
  const budgetBytes = typeof budget[0] === 'number' ? budget[0] : parseBytes(String(budget[0]), budget[1])
  if (!(budgetBytes > 0)) throw bad(`${budget[1]} "${budget[0]}" must be a positive size, e.g. 1.5GiB`)
  let policyName: PolicyName | undefined
  if (policy) {
    const p = String(policy[0]).trim().toLowerCase()
    if (p !== 'lru' && p !== 'tinylfu') throw bad(`${policy[1]} "${policy[0]}" must be lru or tinylfu`)
    policyName = p
  }
  return {
    budgetBytes,
    ...(concurrency ? { loadConcurrency: count(concurrency[1], concurrency[0]) } : {}),
    ...(policyName ? { policy: policyName } : {}),
    ...(hosts ? { hosts: count(hosts[1], hosts[0]) } : {}),
  }
}
