import { activeTracing, setTracing } from './state.js'
import type { TracingSettings } from './settings.js'

/**
 * Starts tracing in this process (the API server, a runner worker, a remote worker): loads the
 * SDK, registers its provider and keeps the tracer where runners and the server look for it.
 * `attributes` describe the process (its role, runner, worker index) on every span it exports.
 * Idempotent: a second start keeps the first.
 */
export async function startTracing(
  settings: TracingSettings,
  attributes: Record<string, string | number> = {},
): Promise<void> {
  if (activeTracing()) return
  const { startSdk } = await import('./sdk.js')
  const sdk = startSdk(settings, attributes)
  setTracing({ settings, tracer: sdk.tracer, sdk })
}

/** Sends the spans still buffered and stops tracing (at shutdown: spans of the last requests are not lost). */
export async function stopTracing(): Promise<void> {
  const t = activeTracing()
  if (t === undefined) return
  setTracing(undefined)
  await t.sdk.shutdown().catch(() => undefined)
}

/** Sends the spans buffered so far, keeping tracing on (a worker before it answers a shutdown). */
export async function flushTracing(): Promise<void> {
  await activeTracing()
    ?.sdk.flush()
    .catch(() => undefined)
}
