import { activeTracing, setTracing } from './state.js'
import type { TracingSettings } from './settings.js'
import { ignore } from '../../errors/index.js'

// One start per process, shared by concurrent callers (two would register two providers).
const STARTING = Symbol.for('modelbundle.tracingStart')
const slot = globalThis as { [STARTING]?: Promise<void> }

/**
 * Starts tracing in this process (the API server, a runner worker, a remote worker): loads the
 * SDK, registers its provider and keeps the tracer where runners and the server look for it.
 * `attributes` describe the process (its role, runner, worker index) on every span it exports.
 * Idempotent: a second start keeps the first.
 */
export function startTracing(
  settings: TracingSettings,
  attributes: Record<string, string | number> = {},
): Promise<void> {
  if (activeTracing()) return Promise.resolve()
  slot[STARTING] ??= (async () => {
    try {
      const { startSdk } = await import('./sdk.js')
      const sdk = startSdk(settings, attributes)
      setTracing({ settings, tracer: sdk.tracer, sdk })
    } finally {
      slot[STARTING] = undefined
    }
  })()
  return slot[STARTING]
}

/** Resolves when `p` does or after `ms`, whichever is first: a collector that does not answer holds no shutdown. */
async function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([
    p.catch(ignore('the spans not sent are lost either way; tracing must not fail a shutdown')),
    new Promise<void>((r) => (timer = setTimeout(r, ms))),
  ])
  clearTimeout(timer)
}

/**
 * Sends the spans still buffered (for at most `timeoutMs`) and stops tracing: at shutdown the
 * last requests' spans are not lost, and a collector that is down delays the exit by no more.
 */
export async function stopTracing(timeoutMs = 3_000): Promise<void> {
  const t = activeTracing()
  if (t === undefined) return
  setTracing(undefined)
  await bounded(t.sdk.shutdown(), timeoutMs)
}

/**
 * Sends the spans buffered so far, for at most `timeoutMs`, keeping tracing on (a runner worker
 * before it exits: the pool kills one that takes over 2 s).
 */
export async function flushTracing(timeoutMs = 1_500): Promise<void> {
  const t = activeTracing()
  if (t === undefined) return
  await bounded(t.sdk.flush(), timeoutMs)
}
