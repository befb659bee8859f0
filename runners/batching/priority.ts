import { BundleError } from '../../errors/index.js'

/**
 * Priority levels, as Triton numbers them: 1 is the most urgent, larger numbers wait; requests
 * of a more urgent level are batched first (a level may starve the ones below it under
 * overload, by design: those are shed at their deadline). A request without one gets `normal`.
 * Names are accepted wherever a number is: `high` (1), `normal` (5), `low` (9).
 */
export const PRIORITY = { high: 1, normal: 5, low: 9 } as const
export const MIN_PRIORITY = 1
export const MAX_PRIORITY = 9

export type PriorityName = keyof typeof PRIORITY
export type Priority = number | PriorityName

/** A priority as given (a number 1–9 or a name), checked; undefined stays undefined. */
export function toPriority(value: Priority | undefined, where: string): number | undefined {
  if (value === undefined) return undefined
  if (typeof value === 'string' && value in PRIORITY) return PRIORITY[value as PriorityName]
  if (typeof value === 'number' && Number.isInteger(value) && value >= MIN_PRIORITY && value <= MAX_PRIORITY)
    return value
  throw new BundleError(
    'E_SERVICE_DEFINITION',
    `${where}: priority ${JSON.stringify(value)} must be 1 (most urgent) to 9, or high, normal, low`,
  )
}

/**
 * A priority a client sent (header or protocol parameter): a level 1–9 or a name; 0 means the
 * default (as in the Open Inference Protocol); anything else is a 400.
 */
export function parseClientPriority(raw: string | number | undefined, where: string): number | undefined {
  if (raw === undefined) return undefined
  const text = String(raw).trim().toLowerCase()
  if (text in PRIORITY) return PRIORITY[text as PriorityName]
  const n = Number(text)
  if (text === '' || !Number.isInteger(n) || n < 0)
    throw new BundleError(
      'E_INPUT_INVALID',
      `${where} must be a priority level 1 (most urgent) to 9, or high, normal, low; got ` +
        `${JSON.stringify(String(raw))}`,
    )
  if (n === 0) return undefined
  return Math.min(n, MAX_PRIORITY)
}
