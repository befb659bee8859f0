import { BundleError } from '../../errors/index.js'
import { parseClientPriority, refusalPace } from '../../runners/index.js'
import type { ApiDefinition } from '../service/definition.js'
import type { Exchange } from './exchange.js'

/** The longest Request-Timeout a client may ask for (a day): past it the value is surely a unit mistake. */
const MAX_TIMEOUT_MS = 86_400_000

export interface CallOptions {
  deadline?: number
  priority?: number
  uses: Set<object>
}

/**
 * What a request asks of the runner calls it makes: `Request-Timeout: <ms>` — how long the client
 * waits, from when the request arrived (it can only shorten a runner's deadlineMs) — and
 * `Request-Priority: 1–9 | high | normal | low` (else the API's own priority). Bad values are 400s.
 */
export function callOptions(
  ex: Pick<Exchange, 'header'>,
  a: ApiDefinition,
  arrived: number,
  uses: Set<object>,
): CallOptions {
  const timeout = ex.header('request-timeout')
  let deadline: number | undefined
  if (timeout !== undefined) {
    const ms = Number(timeout.trim())
    if (timeout.trim() === '' || !Number.isFinite(ms) || ms <= 0 || ms > MAX_TIMEOUT_MS)
      throw new BundleError(
        'E_INPUT_INVALID',
        `the Request-Timeout header must be a number of milliseconds from 1 to ${MAX_TIMEOUT_MS}; got ` +
          `${JSON.stringify(timeout)}`,
      )
    deadline = arrived + ms
  }
  const priority = parseClientPriority(ex.header('request-priority'), 'the Request-Priority header') ?? a.priority
  return { ...(deadline !== undefined ? { deadline } : {}), ...(priority !== undefined ? { priority } : {}), uses }
}

interface Refusing {
  refusal?(o: { deadline?: number | undefined; priority?: number | undefined }): BundleError | undefined
}

interface Expecting {
  expectCall?(): void
}

/**
 * A request came while the server had nothing else in flight: the first runner its API calls (the
 * set keeps the order runners were first called in) hears that a call is coming, so its idle
 * worker is awake when the call lands, the body read and decoded meanwhile.
 */
export function announceLoneCall(uses: Set<object>): void {
  for (const r of uses as Set<Expecting>) {
    r.expectCall?.()
    return
  }
}

/** Throws the refusal (E_RUNNER_OVERLOADED) of the first runner this API calls that would refuse the request now. */
export function refuseEarly(uses: Set<object>, call: CallOptions): void {
  for (const r of uses as Set<Refusing>) {
    const refused = r.refusal?.(call)
    if (refused) throw refused
  }
}

/**
 * Refusals a runner expects to have room for again within this long are answered then, not at
 * once (Retry-After still says 1 s). A client that resends the moment it is refused — a load
 * balancer, a naive retry loop — then comes back when its request can be taken, instead of
 * spinning through refusals whose CPU the runner needs; a refusal that is further off (real
 * overload) is answered at once, so clients can go elsewhere.
 */
export const MAX_REFUSAL_PACE_MS = 50

/** Resolves when a refusal (`err`) should be answered: at once, or when the runner expects room. */
export function refusalDue(err: unknown): Promise<void> | undefined {
  const pace = refusalPace(err)
  if (pace === undefined || pace <= 0 || pace > MAX_REFUSAL_PACE_MS) return undefined
  return new Promise((resolve) => setTimeout(resolve, pace))
}
