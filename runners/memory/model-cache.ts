import { BundleError } from '../../errors/index.js'
import type { EvictionPolicy } from './policy.js'
import { mib } from './size.js'

/** What the cache loads and evicts: one model (all it needs to run), as its runner does it. */
export interface Resident {
  /** Loads the model; answers what loading it cost (bytes of resident memory). */
  load(): Promise<number>
  /** Unloads it: its memory goes back. Called only while it has no work (busy() false, no lease). */
  unload(): Promise<void>
  /** Work queued or running (a model with work in flight is never evicted). */
  busy(): boolean
  /** The model's file size, what its first load is predicted from. */
  readonly fileBytes: number
}

/** What the cache tells its observer (metrics, logs). */
export interface CacheEvents {
  loaded?(name: string, seconds: number, bytes: number, fileBytes: number): void
  evicted?(name: string, bytes: number): void
  failed?(name: string, err: unknown): void
}

export interface ModelCacheOptions {
  /** Bytes the models may hold together. */
  capacity: number
  policy: EvictionPolicy
  /** Loads at once (default 2). */
  concurrency?: number
  events?: CacheEvents
}

type State = 'unloaded' | 'loading' | 'loaded' | 'unloading'

interface Slot {
  name: string
  resident: Resident
  state: State
  /** Measured by its last load; until then, predicted from its file. */
  bytes: number | undefined
  lastUse: number
  /** Wall-clock time of its last use (Date.now()), for people. */
  lastUsedAt: number | undefined
  leases: number
  pinned: boolean
  /** The load or unload running now: every request for the model waits for the same one. */
  pending: Promise<void> | undefined
  /** What `pending` is: a failed load fails everyone waiting for it; an unload is waited out. */
  pendingKind: 'load' | 'unload' | undefined
}

/** A model's row, as `/v2/repository/index` and `bundle models loaded` show it. */
export interface CacheRow {
  name: string
  state: State
  bytes: number | undefined
  predicted: boolean
  lastUsedAt: number | undefined
  pinned: boolean
  inFlight: number
}

/**
 * Models held under a memory budget, as KServe ModelMesh's per-replica cache: a request for a model
 * not loaded loads it (one load however many ask), first evicting — by the policy, least recently
 * used by default — loaded models that have nothing queued or running until the new one fits.
 * Each request holds a lease from acquire() to its release: a model with a lease is never evicted.
 * When every loaded model is busy, a load waits for one to finish (within the caller's deadline);
 * a model that cannot fit even alone is refused. Explicitly loaded models are pinned.
 */
export class ModelCache {
  private readonly slots = new Map<string, Slot>()
  private readonly waiters = new Set<() => void>()
  private loading = 0
  private readonly queue: (() => void)[] = []
  /** Bytes reserved for loads in progress (their prediction). */
  private reserved = 0
  private tick = 0
  /** What a load cost for each byte of its file, learned from the loads so far. */
  private ratio = { bytes: 0, file: 0 }
  private readonly concurrency: number
  loads = 0
  evictions = 0

  constructor(private readonly o: ModelCacheOptions) {
    this.concurrency = Math.max(1, o.concurrency ?? 2)
  }

  get capacity(): number {
    return this.o.capacity
  }

  /** Bytes held: the loaded models' measured sizes, loads in progress, unloads not yet done. */
  used(): number {
    return this.committed() + this.bytesIn('unloading')
  }

  /** Bytes that stay held: loaded models and loads in progress (unloads not counted). */
  private committed(): number {
    return this.reserved + this.bytesIn('loaded')
  }

  private bytesIn(state: State): number {
    let sum = 0
    for (const s of this.slots.values()) if (s.state === state) sum += s.bytes ?? 0
    return sum
  }

  add(name: string, resident: Resident): void {
    this.slots.set(name, {
      name,
      resident,
      state: 'unloaded',
      bytes: undefined,
      lastUse: 0,
      lastUsedAt: undefined,
      leases: 0,
      pinned: false,
      pending: undefined,
      pendingKind: undefined,
    })
  }

  has(name: string): boolean {
    return this.slots.has(name)
  }

  /** Whether `name` is loaded now. */
  isLoaded(name: string): boolean {
    return this.slots.get(name)?.state === 'loaded'
  }

  /** The size `name` is accounted at: measured, else predicted from its file. */
  predict(name: string): number {
    const s = this.slot(name)
    if (s.bytes !== undefined) return s.bytes
    const per = this.ratio.file > 0 ? this.ratio.bytes / this.ratio.file : 1
    return Math.round(s.resident.fileBytes * Math.max(1, per))
  }

  /** An explicit load (the repository API) keeps the model until it is unloaded explicitly. */
  pin(name: string, pinned: boolean): void {
    this.slot(name).pinned = pinned
  }

  /**
   * A request for `name`: resolves once the model is loaded, with the lease's release (call it when
   * the request's work is done). `deadline` (performance.now() clock) bounds the wait.
   */
  async acquire(name: string, deadline?: number): Promise<() => void> {
    const s = this.slot(name)
    s.leases++
    s.lastUse = ++this.tick
    s.lastUsedAt = Date.now()
    this.o.policy.record(name)
    let released = false
    const release = () => {
      if (released) return
      released = true
      s.leases--
      this.notify()
    }
    try {
      while (s.state !== 'loaded') await this.within(this.ensure(s), deadline, s)
    } catch (err) {
      release()
      throw err
    }
    return release
  }

  /** Loads `name` now (an explicit load): pinned until unloaded. */
  async load(name: string): Promise<void> {
    const release = await this.acquire(name)
    this.pin(name, true)
    release()
  }

  /** Unloads `name` once its work is done (an explicit unload): unpinned, out of memory. */
  async unload(name: string): Promise<void> {
    const s = this.slot(name)
    s.pinned = false
    while (s.pending) await s.pending.catch(() => {})
    if (s.state !== 'loaded') return
    while (s.leases > 0 || s.resident.busy()) await this.changed()
    if (s.state === 'loaded') await this.evict(s, false)
  }

  /** Forgets `name` (unloaded explicitly, its runner stopped): it is not the cache's to load any more. */
  remove(name: string): void {
    this.slots.delete(name)
    this.notify()
  }

  /** The model was swapped for another version while loaded: what the new one costs. */
  resized(name: string, bytes: number): void {
    const s = this.slots.get(name)
    if (s === undefined || s.state !== 'loaded') return
    s.bytes = bytes
    void this.trim()
  }

  /** The model's process died or it was unloaded behind the cache's back: not loaded any more. */
  lost(name: string): void {
    const s = this.slots.get(name)
    if (s === undefined || s.state !== 'loaded') return
    s.state = 'unloaded'
    this.notify()
  }

  rows(): CacheRow[] {
    return [...this.slots.values()].map((s) => ({
      name: s.name,
      state: s.state,
      bytes: s.bytes ?? this.predict(s.name),
      predicted: s.bytes === undefined,
      lastUsedAt: s.lastUsedAt,
      pinned: s.pinned,
      inFlight: s.leases,
    }))
  }

  private slot(name: string): Slot {
    const s = this.slots.get(name)
    if (s === undefined) throw new BundleError('E_MODEL_NOT_FOUND', `the model cache holds no model named ${name}`)
    return s
  }

  /** The load (or the unload it must wait for) that makes `s` loaded: one for every caller. */
  private ensure(s: Slot): Promise<void> {
    if (s.pending) return s.pendingKind === 'load' ? s.pending : s.pending.catch(() => {})
    const p = this.loadNow(s).finally(() => {
      if (s.pending === p) s.pending = s.pendingKind = undefined
      this.notify()
    })
    s.pending = p
    s.pendingKind = 'load'
    return p
  }

  private async loadNow(s: Slot): Promise<void> {
    const need = this.predict(s.name)
    if (need > this.o.capacity) throw this.overBudget(s.name, need)
    // A load's time counts from here: what its first request waits for it (room, a turn, the load).
    const started = performance.now()
    s.state = 'loading'
    let reserved = false
    let turn = false
    try {
      // Room is made when the request misses, as least-recently-used decides at that moment; only
      // the loading itself waits for a turn (--model-load-concurrency).
      await this.makeRoom(need)
      reserved = true
      await this.loadTurn()
      turn = true
      const bytes = await s.resident.load()
      s.bytes = bytes
      this.ratio.bytes += bytes
      this.ratio.file += s.resident.fileBytes
      s.state = 'loaded'
      // Predicted to fit, measured not to: it goes again, and is refused from now on.
      if (bytes > this.o.capacity) {
        await this.evict(s, false)
        throw this.overBudget(s.name, bytes)
      }
      this.loads++
      const seconds = (performance.now() - started) / 1000
      this.o.events?.loaded?.(s.name, seconds, bytes, s.resident.fileBytes)
    } catch (err) {
      s.state = 'unloaded'
      this.o.events?.failed?.(s.name, err)
      throw err
    } finally {
      if (reserved) this.reserved -= need
      if (turn) this.loadDone()
    }
    // Measured above its prediction: what is over goes now, if anything can.
    await this.trim()
  }

  /**
   * Evicts until `need` more bytes fit, then reserves them; when nothing more can go (every loaded
   * model busy, or held by loads already reserved) it waits for a change. Only a load that fits
   * reserves, so waiting loads never hold each other's room. Returns once the evicted models' memory
   * is given back. Models being unloaded count as gone when choosing (two loads do not both evict
   * for the same bytes) but hold their memory until they are.
   */
  private async makeRoom(need: number): Promise<void> {
    for (;;) {
      const over = this.committed() + need - this.o.capacity
      if (over <= 0) break
      const victims = this.o.policy.victims(this.candidates(), over)
      if (victims !== undefined) for (const v of victims) void this.evict(this.slots.get(v)!, true)
      else await this.changed()
    }
    this.reserved += need
    while (this.used() > this.o.capacity) await this.changed()
  }

  private overBudget(name: string, bytes: number): BundleError {
    return new BundleError(
      'E_MODEL_OVER_BUDGET',
      `model ${name} needs ${mib(bytes)}, more than the whole model memory budget (${mib(this.o.capacity)}); ` +
        'raise --memory-budget or serve it from a server of its own',
    )
  }

  /** Evicts what can go now to get back under capacity; does not wait. */
  private async trim(): Promise<void> {
    const over = this.committed() - this.o.capacity
    if (over <= 0) return
    const cs = this.candidates()
    const victims = this.o.policy.victims(cs, over) ?? cs.map((c) => c.name)
    await Promise.all(victims.map((v) => this.evict(this.slots.get(v)!, true)))
  }

  /** Loaded models that may go now: unpinned, no lease, nothing queued or running. */
  private candidates() {
    return [...this.slots.values()]
      .filter((s) => s.state === 'loaded' && !s.pinned && s.leases === 0 && !s.resident.busy())
      .map((s) => ({ name: s.name, bytes: s.bytes ?? 0, lastUse: s.lastUse }))
  }

  private async evict(s: Slot, counted: boolean): Promise<void> {
    if (s.state !== 'loaded') return
    s.state = 'unloading'
    const bytes = s.bytes ?? 0
    const done = s.resident.unload().finally(() => {
      s.state = 'unloaded'
      if (s.pending === done) s.pending = s.pendingKind = undefined
      this.notify()
    })
    s.pending = done
    s.pendingKind = 'unload'
    await done.catch((err: unknown) => this.o.events?.failed?.(s.name, err))
    if (counted) {
      this.evictions++
      this.o.events?.evicted?.(s.name, bytes)
    }
  }

  private loadTurn(): Promise<void> {
    if (this.loading < this.concurrency) {
      this.loading++
      return Promise.resolve()
    }
    return new Promise((resolve) => this.queue.push(resolve))
  }

  private loadDone(): void {
    const next = this.queue.shift()
    if (next) next()
    else this.loading--
  }

  /**
   * Resolves at the next change: a lease released, a load or unload ended — or after 50 ms, since a
   * runner's queue emptying (busy() turning false) is not announced.
   */
  private changed(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.delete(done)
        resolve()
      }, 50)
      const done = () => {
        clearTimeout(timer)
        resolve()
      }
      this.waiters.add(done)
    })
  }

  private notify(): void {
    const all = [...this.waiters]
    this.waiters.clear()
    for (const w of all) w()
  }

  /** `p`, unless `deadline` passes first: then the caller stops waiting (the load goes on for others). */
  private within(p: Promise<void>, deadline: number | undefined, s: Slot): Promise<void> {
    if (deadline === undefined) return p
    const left = deadline - performance.now()
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new BundleError(
              'E_MODEL_LOAD_TIMEOUT',
              `model ${s.name} could not be loaded within the request's deadline ` +
                `(${this.loading} loads running, every other model busy or loading)`,
            ),
          ),
        Math.max(0, left),
      )
      p.then(
        () => (clearTimeout(timer), resolve()),
        (err: unknown) => (clearTimeout(timer), reject(err)),
      )
    })
  }
}
