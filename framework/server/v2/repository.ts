import { BundleError, isBundleError, ignore } from '../../../errors/index.js'
import {
  isVersioned,
  type ModelMemory,
  OnnxRunner,
  queueName,
  type RedisLink,
  type RemoteHoldings,
  type InferenceModel,
  type Runner,
  type RunnerOverrides,
  type VersionedRunner,
} from '../../../runners/index.js'
import { redactPaths } from '../error-response.js'
import { type Entry, type IndexRow, indexRows } from './repository-entry.js'
import { RepositoryStore } from './repository-store.js'
import { loadConfig } from './triton-config.js'
import { loadFailed, noAvailableVersions, unknownModel, versionNotFound } from './model-errors.js'

/** What a load request may say (the repository extension's `parameters`). */
export interface LoadRequest {
  /** Exact version or prefix; default: the newest stored version. */
  version?: string
  /**
   * Runner options for this model (workers, batching, warmup, …) as in a serve config file,
   * and/or Triton's model configuration fields (max_batch_size, dynamic_batching,
   * instance_group, model_warmup): an object or its JSON text.
   */
  config?: unknown
  /** Keep the versions already loaded next to the new one instead of swapping them out. */
  keep?: boolean
}

/** A model to load at start-up (`bundle serve --models`): its name here and the tag it resolves. */
export interface ServedModel {
  name: string
  tag: string
  /** Its runner settings (serve config file, BUNDLE_RUNNER_* variables). */
  config?: RunnerOverrides
}

/**
 * The models a server hosts and their versions, for the Open Inference Protocol and its
 * repository extension. The store is the repository, as Triton's model directory is: every
 * model in it can be loaded at run time, next to the service's own runners (onnx) and the
 * models `bundle serve --models` loaded at start-up. A model once loaded stays known after an
 * unload or a failed load (UNAVAILABLE, with the reason). Loading a newer version of a serving
 * model swaps it without failing a request (`versions.swap`); `keep` loads it next to the old
 * one instead. Loads and unloads of one model run one after the other.
 */
export class ModelRepository {
  private readonly entries = new Map<string, Entry>()
  private readonly ensembles = new Map<string, Runner>()
  private readonly locks = new Map<string, Promise<unknown>>()
  private readonly store: RepositoryStore

  constructor(
    declared: readonly Runner[],
    private readonly o: {
      home?: string
      attach: (r: Runner) => void
      servable?: (name: string) => boolean
      /** `--memory-budget`: models load on demand and are evicted by least recent use. */
      memory?: ModelMemory | undefined
      /**
       * `--runners remote`: the models' batches run on `bundle worker --models` processes, each
       * model on its queue in this scope; `holdings` is what those workers report they hold.
       */
      remote?: { link: RedisLink; scope: string; graceMs?: number; holdings?: RemoteHoldings } | undefined
    },
  ) {
    this.store = new RepositoryStore(o.home, o.servable)
    for (const r of declared)
      if (isVersioned(r)) this.entries.set(r.name, { primary: r, others: new Map(), declared: true, state: 'READY' })
    for (const r of declared) {
      if (r.kind !== 'ensemble' || r.bind === undefined) continue
      if (this.entries.has(r.name))
        throw new BundleError(
          'E_SERVICE_DEFINITION',
          `ensemble "${r.name}" has the name of one of the service's runners`,
        )
      // Steps are models, never other ensembles: what a step resolves is an onnx runner's model.
      r.bind((name, version) => this.findModel(name, version))
      this.ensembles.set(r.name, r)
    }
  }

  private ensembleModels(): InferenceModel[] {
    return [...this.ensembles.values()].flatMap((e) => e.inference?.() ?? [])
  }

  /** The versions of an entry that serve now (the serving default first). */
  private serving(e: Entry | undefined): InferenceModel[] {
    if (e === undefined || e.state === 'UNAVAILABLE') return []
    return [e.primary, ...e.others.values()].flatMap((r) => r.inference() ?? [])
  }

  /** Every loaded model version, as /v2 serves it. */
  models(): InferenceModel[] {
    return [...[...this.entries.values()].flatMap((e) => this.serving(e)), ...this.ensembleModels()]
  }

  /** The model or ensemble a request goes to: the named version, else the serving default. */
  find(name: string, version?: string): InferenceModel {
    const ens = this.ensembles.get(name)
    if (ens !== undefined) {
      const m = ens.inference?.()
      if (m === undefined) throw new BundleError('E_HTTP_NOT_READY', `ensemble "${name}" has not started`)
      if (version !== undefined && version !== m.version) throw versionNotFound(name, version, [m.version])
      return m
    }
    return this.findModel(name, version)
  }

  /** Every version of `name` that can be asked for now (the serving default first). */
  versions(name: string): string[] {
    const ens = this.ensembles.get(name)?.inference?.()
    if (ens !== undefined) return [ens.version]
    return [...new Set(this.serving(this.entries.get(name)).map((m) => m.version))]
  }

  /** A hosted model (not an ensemble) at the named version, else its serving default. */
  findModel(name: string, version?: string): InferenceModel {
    const e = this.entries.get(name)
    const models = this.serving(e)
    if (models.length === 0) {
      if (e !== undefined) throw noAvailableVersions(name, e.reason ?? e.state.toLowerCase())
      throw this.store.holds(name) ? noAvailableVersions(name, 'not loaded') : unknownModel(name)
    }
    if (version === undefined) return models[0]!
    const m = models.find((x) => x.version === version)
    if (m === undefined)
      throw versionNotFound(
        name,
        version,
        models.map((x) => x.version),
      )
    return m
  }

  /**
   * Whether `name` (at `version`) is ready now, as ModelReady answers: false for a model the
   * server knows (in the store, or loaded once) that is not loaded; NOT_FOUND only for a name it
   * does not know at all.
   */
  isReady(name: string, version?: string): boolean {
    try {
      return this.find(name, version).ready()
    } catch (err) {
      if (isBundleError(err) && err.code === 'E_MODEL_NOT_FOUND' && this.known(name)) return false
      throw err
    }
  }

  /** A name the server knows: an ensemble, a model it hosts or hosted, or one in the store. */
  private known(name: string): boolean {
    return this.ensembles.has(name) || this.entries.has(name) || this.store.holds(name)
  }

  private serially<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(name) ?? Promise.resolve()
    const next = prev.catch(ignore('that failure was answered to its own caller')).then(fn)
    this.locks.set(name, next)
    return next
  }

  /**
   * Loads `name` (a loaded model's name, or a model name in the store) at `version`. Whatever
   * fails — an unknown model, a config that contradicts the model, a file the runtime refuses,
   * a warm-up asked for that fails — answers "failed to load 'name': why" and leaves the server
   * and its other models as they were.
   */
  load(name: string, req: LoadRequest = {}): Promise<InferenceModel> {
    let config: RunnerOverrides | undefined
    try {
      config = req.config === undefined ? undefined : loadConfig(name, req.config)
    } catch (err) {
      return Promise.reject(loadFailed(name, err))
    }
    if (this.ensembles.has(name)) {
      // An ensemble is part of the service: loaded while its step models are.
      if (req.version !== undefined || config !== undefined)
        return Promise.reject(
          new BundleError(
            'E_INPUT_INVALID',
            `"${name}" is an ensemble of this service; it has no versions or runner config to load (load its step ` +
              `models instead)`,
          ),
        )
      return Promise.resolve().then(() => this.find(name))
    }
    return this.serially(name, async () => {
      try {
        const model = await this.loadNow(name, req, config)
        // Under a memory budget an explicit load loads the model now and keeps it (pinned) until unloaded.
        const cache = this.o.memory?.cache
        if (cache?.has(name)) await cache.load(name)
        return model
      } catch (err) {
        throw loadFailed(name, err)
      }
    })
  }

  /** Loads every model `bundle serve --models` named, two at a time; one that fails is logged and stays UNAVAILABLE. */
  async preload(models: readonly ServedModel[], failed: (name: string, err: unknown) => void): Promise<void> {
    const queue = [...models]
    const next = async (): Promise<void> => {
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
        const { name, tag, config } = m
        // The exact version the tag (a range, latest) resolves to: a failed load is shown on its row.
        await this.serially(name, () => this.startNew(name, this.store.exactTag(tag), config)).catch((err: unknown) =>
          failed(name, loadFailed(name, err)),
        )
      }
    }
    await Promise.all([next(), next()])
  }

  private async loadNow(name: string, req: LoadRequest, config: RunnerOverrides | undefined): Promise<InferenceModel> {
    const entry = this.entries.get(name)
    if (!entry?.declared && this.o.servable && !this.o.servable(name))
      throw new BundleError(
        'E_MODEL_NOT_FOUND',
        `this server serves the models its --models names, and ${name} is not one of them`,
      )
    const modelName = entry?.primary.versions.model?.name ?? entry?.primary.versions.tag.split(/[:@]/)[0] ?? name
    const tag = this.store.resolve(modelName, req.version)
    // Never loaded, or not loaded now and not the service's own: a fresh runner on this version.
    if (entry === undefined || (entry.state === 'UNAVAILABLE' && !entry.declared))
      return this.startNew(name, tag, config ?? entry?.config)
    if (config) entry.primary.configure(config)
    if (entry.state === 'UNAVAILABLE') {
      // The service's runner, unloaded earlier: start it again (on the requested version).
      entry.state = 'LOADING'
      try {
        const current = entry.primary.versions.model
        await entry.primary.start()
        if (current !== undefined && current.tag !== tag) await entry.primary.versions.swap(tag)
        entry.state = 'READY'
        entry.reason = undefined
      } catch (err) {
        entry.state = 'UNAVAILABLE'
        // Shown by the open model metadata routes: without the file paths a runner's error may quote.
        entry.reason = redactPaths((err as Error).message)
        throw err
      }
      return entry.primary.inference()!
    }
    if (config && entry.primary.versions.model?.tag === tag) {
      // A load with a config is Triton's reload: the same version starts again with it (a
      // swap, so no request fails), and /v2 config then shows what really runs.
      await entry.primary.versions.swap(tag)
      return entry.primary.inference()!
    }
    if (entry.primary.versions.model?.tag === tag || entry.others.has(tag.split(':')[1]!))
      return this.find(name, tag.split(':')[1])
    if (this.o.remote) throw remoteVersions(name)
    if (req.keep) {
      if (this.o.memory)
        throw new BundleError(
          'E_INPUT_INVALID',
          'under --memory-budget a model serves one version at a time: load without keep to swap versions',
        )
      const other = this.newRunner(name, tag, config)
      try {
        await other.start()
      } catch (err) {
        await other.stop().catch(ignore('the failed start is what the caller hears'))
        throw err
      }
      entry.others.set(other.model!.version, other)
      return other.inference()!
    }
    await entry.primary.versions.swap(tag)
    return entry.primary.inference()!
  }

  private newRunner(name: string, tag: string, config: RunnerOverrides | undefined): OnnxRunner {
    const runner = new OnnxRunner(tag, { name, ...(this.o.home ? { home: this.o.home } : {}) })
    if (config) runner.configure(config)
    const memory = this.o.memory
    if (memory) runner.useMemoryBudget(memory.cache, memory.host)
    const remote = this.o.remote
    if (remote)
      runner.useRemote({
        link: remote.link,
        queue: queueName(remote.scope, name),
        ...(remote.graceMs !== undefined ? { graceMs: remote.graceMs } : {}),
      })
    this.o.attach(runner)
    return runner
  }

  /** A model not loaded now (or never): a new runner; if it fails it stays known, UNAVAILABLE with why. */
  private async startNew(name: string, tag: string, config: RunnerOverrides | undefined): Promise<InferenceModel> {
    const runner = this.newRunner(name, tag, config)
    // A failed load keeps the settings of the last one that worked: a plain reload goes back to them.
    const kept = this.entries.get(name)?.config
    const e: Entry = { primary: runner, others: new Map(), declared: false, state: 'LOADING', config: kept }
    this.entries.set(name, e)
    try {
      await runner.start()
    } catch (err) {
      await runner.stop().catch(ignore('the failed start is what the caller hears'))
      e.state = 'UNAVAILABLE'
      e.reason = `failed to load: ${signatureCode(err)}${redactPaths((err as Error).message)}`
      throw err
    }
    e.state = 'READY'
    e.config = config
    return runner.inference()!
  }

  /**
   * Unloads a model (all its versions, or one): its workers stop once their queued requests are
   * answered. As in Triton, unloading a model that is not loaded succeeds and changes nothing.
   */
  unload(name: string, version?: string): Promise<void> {
    if (this.ensembles.has(name))
      return Promise.reject(
        new BundleError('E_INPUT_INVALID', `"${name}" is an ensemble of this service; unload its step models instead`),
      )
    return this.serially(name, async () => {
      const entry = this.entries.get(name)
      if (entry === undefined || entry.state === 'UNAVAILABLE') return
      if (version !== undefined && version !== entry.primary.versions.model?.version) {
        const other = entry.others.get(version)
        if (other === undefined) return
        entry.others.delete(version)
        await other.stop()
        return
      }
      entry.state = 'UNLOADING'
      const all = [entry.primary, ...entry.others.values()]
      entry.others.clear()
      // Under a memory budget the cache unloads it (once its requests are answered) and forgets it.
      const cache = this.o.memory?.cache
      if (cache?.has(name) && !entry.declared) {
        await cache.unload(name)
        cache.remove(name)
      }
      await Promise.all(all.map((r) => r.stop()))
      entry.state = 'UNAVAILABLE'
      entry.reason = 'unloaded'
    })
  }

  /** Models under a memory budget (`--memory-budget`): their hosts and cache, started with the server. */
  get memory(): ModelMemory | undefined {
    return this.o.memory
  }

  /** The repository index: every onnx model in the store with its state here. */
  index(): IndexRow[] {
    const holdings = this.o.remote?.holdings
    return indexRows(this.store.models(), this.entries, this.ensembles, {
      cache: this.o.memory?.cache.rows(),
      ...(holdings ? { holders: (name: string) => holdings.holders(name) } : {}),
    })
  }

  /** Runners loaded at run time and serving now (metrics sources); the service's own are its definition's. */
  loaded(): VersionedRunner[] {
    return [...this.entries.values()].flatMap((e) => [
      ...(e.declared || e.state === 'UNAVAILABLE' ? [] : [e.primary]),
      ...e.others.values(),
    ])
  }

  /** Every runner the repository made (loaded or not): none of them is the service's to declare. */
  runners(): VersionedRunner[] {
    return [...this.entries.values()].flatMap((e) => (e.declared ? [] : [e.primary, ...e.others.values()]))
  }

  /** Remote runners: what the workers report they hold (started with the server, read by the index). */
  get holdings(): RemoteHoldings | undefined {
    return this.o.remote?.holdings
  }

  async stopAll(): Promise<void> {
    this.o.remote?.holdings?.stop()
    const all = [...this.entries.values()].flatMap((e) => [...(e.declared ? [] : [e.primary]), ...e.others.values()])
    await Promise.all(
      all.map((r) => r.stop().catch(ignore('unloading every model: one that fails to stop does not hold the others'))),
    )
  }
}

/** Remote workers run the version they were started with: the API server cannot change it for them. */
function remoteVersions(name: string): BundleError {
  return new BundleError(
    'E_INPUT_INVALID',
    `with --runners remote the workers serve the version of ${name} they started with: start them with ` +
      `bundle worker --models ${name}:VERSION (and this server with the same) to serve another`,
  )
}

/** A refused signature's code, to lead the reason a model's row shows (`E_SIG_…: `); else nothing. */
const signatureCode = (err: unknown): string => {
  const code = isBundleError(err) ? err.code : undefined
  return code?.startsWith('E_SIG_') ? `${code}: ` : ''
}
