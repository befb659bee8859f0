import { BundleError } from '../../errors/index.js'

/**
 * The most a process stays awake for a lone request's next message (ms): BUNDLE_HOT_WAIT_MS, else
 * HOT_WAIT_MS; 0 turns it off. One request at a time crosses two processes twice, and each time
 * the one it reaches was asleep: an idle core takes 0.1-0.25 ms to wake on the bench machine (a
 * VM), most of the framework's cost on a 1 ms model (docs/defaults.md, "Lone requests").
 */
export function hotWaitMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.BUNDLE_HOT_WAIT_MS
  if (raw === undefined || raw.trim() === '') return HOT_WAIT_MS
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || n > 1000)
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `BUNDLE_HOT_WAIT_MS must be a number of milliseconds from 0 (off) to 1000; got ${JSON.stringify(raw)}`,
    )
  return n
}

export const HOT_WAIT_MS = 10

// Process-wide, not module-wide: a service's runners can come from another copy of this module (the
// compiled one, while the server runs from sources in tests), and must read what the server's copy counts.
const IN_FLIGHT = Symbol.for('modelbundle.requestsInFlight')

/**
 * Requests the servers in this process have in flight (their pipelines count them). Staying awake
 * is for a lone request: beside others, the core a spin takes is one their decoding or the model
 * wanted (measured: PNG at 4 and 32 connections lost 7-13% of goodput when it was not checked).
 */
export const requestsInFlight: { count: number } = ((globalThis as { [IN_FLIGHT]?: { count: number } })[IN_FLIGHT] ??= {
  count: 0,
})

/**
 * The API process stays awake for a call's answer only when the worker's calls are this short
 * (ms): a wake-up is a share worth saving of those, and the spin (a core) stays short.
 */
export const HOT_ANSWER_MAX_MS = 5

/**
 * Keeps this thread's event loop turning (a chain of setImmediate, so libuv polls without
 * sleeping) until release() or until the time held runs out: a message that lands meanwhile is
 * read at once, not after the OS wakes the thread's idle core. Held only while nothing else is
 * happening, so the core it takes is one nothing else wanted.
 */
export class HotWait {
  private until = 0
  private turning = false

  /** Stays awake for `ms` more (a longer hold already running is kept). */
  hold(ms: number): void {
    if (ms <= 0) return
    this.until = Math.max(this.until, performance.now() + ms)
    if (this.turning) return
    this.turning = true
    setImmediate(this.turn)
  }

  /** What was waited for came: sleep as usual from the next turn. */
  release(): void {
    this.until = 0
  }

  /** Whether the loop is being kept awake now. */
  get awake(): boolean {
    return this.turning
  }

  private readonly turn = (): void => {
    if (performance.now() < this.until) setImmediate(this.turn)
    else this.turning = false
  }
}
