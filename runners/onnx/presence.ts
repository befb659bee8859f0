import { IdleTimer } from '../idle-timer.js'
import type { ModelHost } from '../hosting/model-host.js'
import type { ModelCache } from '../memory/model-cache.js'

/** What a runner's presence in memory needs of the runner. */
export interface PresenceOwner {
  readonly name: string
  /** Starts a new generation of the model's current version and serves it; answers what it cost (0: unmeasured). */
  reload(): Promise<number>
  /** Takes the serving generation out of service and lets it finish (its batcher drains, its workers stop). */
  detach(): Promise<void>
  /** Work queued or running (`sequences`: live sequences count too: their state lives in the workers). */
  busy(sequences: boolean): boolean
  /** A generation is serving (false before start and after stop). */
  serving(): boolean
}

/**
 * Whether a runner's model is in memory, and what brings it in and out: an unload after
 * `idleUnloadMs` without a call (the next call loads it again), or — under a memory budget
 * (`bundle serve --memory-budget`) — the model cache, which loads the model for a call's lease and
 * evicts it when its room is needed. Concurrent callers of a load share it.
 */
export class ModelPresence {
  /** Out of memory now (idle-unloaded, or not loaded under a budget); the next call loads it. */
  suspended = false
  /** Times the model was unloaded for idleness (a metric). */
  idleUnloads = 0
  private resuming: Promise<void> | undefined
  private idle: IdleTimer | undefined
  /** Under a memory budget: the cache that loads and evicts the model, and the host it opens in. */
  residency: { cache: ModelCache; host: ModelHost } | undefined

  constructor(private readonly owner: PresenceOwner) {}

  /** Unloads after `afterMs` without a call (never under a budget: the cache unloads what it must). */
  watchIdle(afterMs: number | undefined): void {
    const after = this.residency ? undefined : afterMs
    this.idle?.stop()
    this.idle = after !== undefined && after > 0 ? new IdleTimer(after, () => this.unloadIfIdle()) : undefined
    this.idle?.start()
  }

  /** A new generation serves (start, a load, a swap): in memory, and idleness counts from now. */
  serving(): void {
    this.suspended = false
    this.idle?.start()
  }

  /**
   * Before a call: a promise while it must wait (an idle-unloaded model loads again), else nothing
   * — no promise hop. Under a budget the cache has loaded it already (run() holds a lease).
   */
  wake(): Promise<void> | undefined {
    if (this.residency) return undefined
    this.idle?.touch()
    return this.suspended ? this.resume() : undefined
  }

  /** Under a budget: hands the (described, not loaded) model to the cache. */
  startResident(fileBytes: number): void {
    const cache = this.residency!.cache
    this.suspended = true
    cache.add(this.owner.name, {
      fileBytes,
      load: () => this.owner.reload(),
      unload: () => this.suspend(),
      busy: () => this.owner.busy(false),
    })
  }

  /** Under a budget: the model loaded (or loading) for one call, kept from eviction until released. */
  acquire(deadline: number): Promise<(() => void) | undefined> {
    if (this.residency === undefined) return Promise.resolve(undefined)
    return this.residency.cache.acquire(this.owner.name, deadline)
  }

  /** Unloads the model now. */
  async suspend(): Promise<void> {
    this.suspended = true
    await this.owner.detach()
  }

  /** The process holding the model died: not in memory any more; the next request loads it again. */
  lost(): void {
    void this.suspend()
    this.residency?.cache.lost(this.owner.name)
  }

  stop(): void {
    this.idle?.stop()
    this.suspended = false
  }

  /**
   * Idle for idleUnloadMs: unloads unless work is queued or running. False once unloaded or
   * stopped (the next generation served starts the watch again), true to keep watching.
   */
  private async unloadIfIdle(): Promise<boolean> {
    if (this.suspended || !this.owner.serving()) return false
    if (this.resuming) return true
    if (this.owner.busy(true)) return true
    this.idleUnloads++
    await this.suspend()
    return false
  }

  /** Loads the model again after an idle unload; concurrent callers share one load. */
  private resume(): Promise<void> {
    this.resuming ??= (async () => {
      try {
        await this.owner.reload()
        this.suspended = false
      } finally {
        this.resuming = undefined
      }
    })()
    return this.resuming
  }
}
