import { BundleError } from '../../errors/index.js'

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
}

/**
 * A size as people write it: `1.5GiB`, `800MiB`, `2G` (binary, as Kubernetes' `Gi`), `500MB`
 * (decimal), or bytes. `what` names the setting in the error.
 *
 * @example
 * parseBytes('1.5GiB', '--memory-budget') // 1610612736
 */
export function parseBytes(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text)
  const unit = m ? (UNITS[m[2]!.toLowerCase().replace(/i$/, 'ib')] ?? UNITS[m[2]!.toLowerCase()]) : undefined
  if (m === null || unit === undefined || !(Number(m[1]) > 0))
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `${what} "${text}" is not a size: write a positive number with a unit, e.g. 1.5GiB, 800MiB or 500MB`,
    )
  return Math.round(Number(m[1]) * unit)
}

/** Bytes as MiB with one decimal, for messages. */
export const mib = (bytes: number): string => `${(bytes / 1024 ** 2).toFixed(1)} MiB`
