import type { Clock } from '../../../runners/index.js'
import { isStable, summarize, type Outcome, type WindowStats } from './stats.js'

/** Sends one request and says how it ended; never rejects (failures are outcomes). */
export type Sender = () => Promise<Outcome>

/**
 * Closed loop: `value` clients, each sending its next request the moment the last is answered
 * (refused or not). Open loop: `value` requests a second whatever the server does, evenly spaced
 * or as a Poisson process.
 */
export type Load =
  | { mode: 'concurrency'; value: number }
  | { mode: 'rate'; value: number; arrivals: 'constant' | 'poisson' }

export interface StepOptions {
  clock: Clock
  /** Not counted: the server's batchers and caches settle first. */
  warmupMs: number
  windowMs: number
  /** A step that is not stable after this many windows ends anyway, marked unstable. */
  maxWindows: number
  /** The last `stableWindows` windows must agree within `tolerance` (perf_analyzer: 3 and 10%). */
  stableWindows?: number
  tolerance?: number
  /** Uniform [0, 1) for Poisson gaps (tests pass a seeded one). */
  random?: () => number
  /** Called after each window with the windows so far. */
  onWindow?: (windows: WindowStats[]) => void
  /** Called when counting starts (0) and as each window ends (1, 2, …): server snapshots line up with windows. */
  onEdge?: (index: number) => void
}

export interface StepResult {
  load: Load
  stable: boolean
  windows: number
  /** The last stableWindows windows taken together. */
  stats: WindowStats
  /** Open loop: the most requests in flight at once (a server falling behind piles them up). */
  maxInFlight: number
}

interface Answer {
  outcome: Outcome
  ms: number
}

/**
 * Measures one load step: a warm-up, then windows until the last few agree (or maxWindows),
 * counting each answer in the window it arrived in. In the open loop a request's latency counts
 * from when it was due, not when it went out, so a generator that falls behind does not hide
 * the wait (coordinated omission).
 */
export async function measureStep(send: Sender, load: Load, o: StepOptions): Promise<StepResult> {
  const { clock } = o
  const stableWindows = o.stableWindows ?? 3
  const sleep = (ms: number) => new Promise<void>((r) => clock.setTimeout(r, Math.max(0, ms)))
  let stopped = false
  let counting = false
  let current: Answer[] = []
  const windows: Answer[][] = []
  const durations: number[] = []
  const summaries: WindowStats[] = []
  let inFlight = 0
  let maxInFlight = 0
  const record = (outcome: Outcome, ms: number) => {
    if (counting) current.push({ outcome, ms })
  }
  const sendOne = async (due: number) => {
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    const outcome = await send().catch((err: unknown) => ({ ok: false, code: String((err as Error).message) }))
    inFlight--
    record(outcome, clock.now() - due)
  }
  const loops: Promise<void>[] = []
  if (load.mode === 'concurrency') {
    for (let i = 0; i < load.value; i++)
      loops.push(
        (async () => {
          while (!stopped) await sendOne(clock.now())
        })(),
      )
  } else {
    const rate = load.value
    const random = o.random ?? Math.random
    const gap = () => (load.arrivals === 'poisson' ? (-Math.log(1 - random()) * 1000) / rate : 1000 / rate)
    const pending = new Set<Promise<void>>()
    loops.push(
      (async () => {
        let due = clock.now()
        while (!stopped) {
          // Everything due by now goes out now (timers are coarser than high rates' gaps).
          while (due <= clock.now() && !stopped) {
            const p = sendOne(due)
            pending.add(p)
            void p.finally(() => pending.delete(p))
            due += gap()
          }
          await sleep(due - clock.now())
        }
        await Promise.all(pending)
      })(),
    )
  }
  await sleep(o.warmupMs)
  counting = true
  o.onEdge?.(0)
  let started = clock.now()
  while (windows.length < o.maxWindows) {
    await sleep(started + o.windowMs - clock.now())
    const ended = clock.now()
    windows.push(current)
    durations.push(ended - started)
    summaries.push(summarize(current, ended - started))
    current = []
    started = ended
    o.onEdge?.(windows.length)
    o.onWindow?.(summaries)
    if (isStable(summaries, stableWindows, o.tolerance)) break
  }
  stopped = true
  counting = false
  await Promise.all(loops)
  const last = windows.slice(-stableWindows)
  return {
    load,
    stable: isStable(summaries, stableWindows, o.tolerance),
    windows: windows.length,
    stats: summarize(
      last.flat(),
      durations.slice(-stableWindows).reduce((s, d) => s + d, 0),
    ),
    maxInFlight,
  }
}
