import { AsyncLocalStorage } from 'node:async_hooks'
import type { StageTimes, SubmitOptions } from './batching/dispatcher.js'

export type { StageTimes }

/**
 * What a runner call inherits from the request that makes it, without the service passing it
 * along: `cls.run(x)` inside an API method queues with that request's deadline and priority, and
 * leaves the queue if the client goes away. The server sets it around each API call; code that
 * runs outside a request (start-up hooks, tests) has none and gets the runner's defaults.
 */
export interface CallContext {
  /** When the caller stops waiting, on performance.now()'s clock; shortens the runner's deadlineMs. */
  readonly deadline?: number
  /** 1 (most urgent) to 9. */
  readonly priority?: number
  /** True once the request's client has gone: its queued runner calls are not run. */
  readonly gone?: () => boolean
  /**
   * Aborted when the client goes: its queued runner calls leave their queues at once (streams
   * and WebSocket sessions, whose calls may wait behind long batches; `gone` is asked only
   * when a call's turn comes).
   */
  readonly signal?: AbortSignal
  /** Runners the request called: the server learns which runners an API uses, to refuse early. */
  readonly uses?: Set<object>
  /** Where the request's runner calls add up their time (the server's Server-Timing header). */
  readonly timing?: StageTimes
}

// Process-wide, not module-wide: a service's runners can come from another copy of this module
// (the compiled one, while the server runs from sources in tests), and must read what the server's copy set.
const KEY = Symbol.for('modelbundle.callContext')
const slot = globalThis as { [KEY]?: AsyncLocalStorage<CallContext> }
const storage: AsyncLocalStorage<CallContext> = (slot[KEY] ??= new AsyncLocalStorage<CallContext>())

/** Runs `fn` with `ctx` as the context of every runner call it makes, awaited or not. */
export function withCallContext<T>(ctx: CallContext, fn: () => T): T {
  return storage.run(ctx, fn)
}

/** The context of the request this code runs for, if any. */
export function currentCall(): CallContext | undefined {
  return storage.getStore()
}

/** What a runner hands its batcher from the request's context (its deadline, priority, whether its client went). */
export function submitOptionsOf(call: CallContext | undefined): SubmitOptions {
  if (call === undefined) return {}
  return { deadline: call.deadline, priority: call.priority, gone: call.gone, timing: call.timing, signal: call.signal }
}
