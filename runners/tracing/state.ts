import type { Tracer } from '@opentelemetry/api'
import type { Sdk } from './sdk.js'
import type { TracingSettings } from './settings.js'

/** The process's tracing once started: what the API process decided, and the SDK it runs. */
export interface Tracing {
  settings: TracingSettings
  tracer: Tracer
  sdk: Sdk
}

// Process-wide, not module-wide: a service's runners can come from another copy of these modules
// (the compiled one, while the server runs from sources in tests; runners/pool/shared-modules.ts
// makes `bundle serve` share one), and they must see the tracing the server's copy started.
const KEY = Symbol.for('modelbundle.tracing')
const slot = globalThis as { [KEY]?: Tracing }

/**
 * The tracer, or undefined while tracing is off — the one check the hot path makes when off
 * (no SDK is loaded then, and no span object is made).
 */
export function activeTracer(): Tracer | undefined {
  return slot[KEY]?.tracer
}

/** What the API process decided: runner workers it spawns are told, and export where it does. */
export function activeTracing(): Tracing | undefined {
  return slot[KEY]
}

export function setTracing(t: Tracing | undefined): void {
  slot[KEY] = t
}
