import type { TraceCarrier } from '../tracing/index.js'

/**
 * What a runner hands its batches to. A pool runs calls somewhere — worker processes on this
 * machine (WorkerPool), worker threads in this process (isolation: 'thread'), or workers on
 * other machines fed through Redis (RemotePool) — and the runner does not care which: it
 * starts the pool, sends calls, asks whether it is ready, and stops it.
 */
export interface Pool {
  /** Where calls run, for /runners and metrics. */
  readonly kind: 'process' | 'thread' | 'remote'
  /** Resolves when the pool can take calls; rejects (and leaves nothing running) when it cannot start. */
  start(): Promise<void>
  /** Fails queued calls, lets running ones finish (up to graceMs), then stops every worker. */
  stop(graceMs?: number): Promise<void>
  ready(): boolean
  /** Why it cannot take calls now, beyond starting up (remote: Redis down, no live worker). */
  notReadyReason(): string | undefined
  /** Live workers. */
  readonly size: number
  /**
   * Runs one call; args and results may hold typed arrays. `timing`, where the pool can tell,
   * is told how long the call ran inside its worker (compute, without the trip there and back).
   * `trace`: the traced requests the call serves; the worker's spans join their traces.
   */
  run(method: string, args: unknown, timing?: (ms: number) => void, trace?: TraceCarrier[]): Promise<unknown>
  /**
   * Whether args may hold GatheredTensors (a batch's rows as separate pieces, written straight
   * into the worker's memory); a pool that cannot take them gets tensors joined.
   */
  readonly gathers: boolean
}

/** A pool on this machine: its workers restart after a crash and can be added and removed. */
export interface LocalPool extends Pool {
  readonly kind: 'process' | 'thread'
  /** Workers restarted after a crash or a timeout. */
  readonly restarts: number
  /** Adds a worker; resolves once it is ready (warmed). */
  grow(): Promise<void>
  /** Removes one worker once its calls are done. */
  shrink(): Promise<void>
  /**
   * A lone request that will call this runner arrived: the idle worker its call will go to stays
   * awake for it (`every`: the call is pinned to a worker not known yet, all idle ones do).
   */
  wake?(every?: boolean): void
}

/** A pool whose workers run elsewhere: how many are live and how many batches wait for one. */
export interface RemoteLikePool extends Pool {
  readonly kind: 'remote'
  state(): { workers: number; queued: number; slotsPerWorker?: number | undefined; waiting?: number }
}

export const isLocalPool = (p: Pool | undefined): p is LocalPool => p !== undefined && p.kind !== 'remote'
export const isRemotePool = (p: Pool | undefined): p is RemoteLikePool => p?.kind === 'remote'

/** Starts a pool; one that cannot start is stopped at once, so no worker keeps restarting behind it. */
export async function startPool<P extends Pool>(pool: P): Promise<P> {
  try {
    await pool.start()
  } catch (err) {
    await pool.stop(0)
    throw err
  }
  return pool
}
