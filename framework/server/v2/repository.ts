import { BundleError, isBundleError } from '../../../errors/index.js'
import {
  isVersioned,
  OnnxRunner,
  validateOverrides,
  type InferenceModel,
  type Runner,
  type RunnerOverrides,
  type VersionedRunner,
} from '../../../runners/index.js'
import { ModelStore } from '../../../store/index.js'
import { redactPaths } from '../error-response.js'

/** What a load request may say (the repository extension's `parameters`). */
export interface LoadRequest {
  /** Exact version or prefix; default: the newest stored version. */
  version?: string
  /** Runner options for this model (workers, batching, warmup, …), as in a serve config file. */
  config?: RunnerOverrides
  /** Keep the versions already loaded next to the new one instead of swapping them out. */
  keep?: boolean
}

interface Entry {
  /** The runner unversioned requests go to; a swap replaces its model in place. */
  primary: VersionedRunner
  /** Other versions loaded side by side (load with keep). */
  others: Map<string, VersionedRunner>
  declared: boolean
  state: 'READY' | 'LOADING' | 'UNLOADING' | 'UNAVAILABLE'
  reason?: string
}

/**
 * The models a server hosts and their versions, for the Open Inference Protocol and its
 * repository extension: the service's own runners with versions (onnx), plus any model of the store loaded at
 * run time. Loading a newer version of a serving model swaps it without failing a request
 * (`versions.swap`); `keep` loads it next to the old one instead. Loads and unloads of one
 * model run one after the other.
 */
export class ModelRepository {
  private readonly entries = new Map<string, Entry>()
  private readonly ensembles = new Map<string, Runner>()
  private readonly locks = new Map<string, Promise<unknown>>()

  constructor(
    declared: readonly Runner[],
    private readonly o: { home?: string; attach: (r: Runner) => void },
  ) {
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

  /** Every loaded model version, as /v2 serves it. */
  models(): InferenceModel[] {
    const loaded = [...this.entries.values()].flatMap((e) =>
      e.state === 'READY' || e.state === 'LOADING'
        ? [e.primary, ...e.others.values()].flatMap((r) => r.inference() ?? [])
        : [],
    )
    return [...loaded, ...this.ensembleModels()]
  }

  /** The model or ensemble a request goes to: the named version, else the serving default. */
  find(name: string, version?: string): InferenceModel {
    const ens = this.ensembles.get(name)
    if (ens !== undefined) {
      const m = ens.inference?.()
      if (m === undefined) throw new BundleError('E_HTTP_NOT_READY', `ensemble "${name}" has not started`)
      if (version !== undefined && version !== m.version)
        throw new BundleError(
          'E_HTTP_NOT_FOUND',
          `ensemble "${name}" has no version "${version}" (it has ${m.version})`,
        )
      return m
    }
    return this.findModel(name, version)
  }

  /** Every version of `name` that can be asked for now (the serving default first). */
  versions(name: string): string[] {
    const ens = this.ensembles.get(name)?.inference?.()
    if (ens !== undefined) return [ens.version]
    const e = this.entries.get(name)
    const models =
      e && e.state !== 'UNAVAILABLE' ? [e.primary, ...e.others.values()].flatMap((r) => r.inference() ?? []) : []
    return [...new Set(models.map((m) => m.version))]
  }

  /** A hosted model (not an ensemble) at the named version, else its serving default. */
  findModel(name: string, version?: string): InferenceModel {
    const e = this.entries.get(name)
    const models =
      e && e.state !== 'UNAVAILABLE' ? [e.primary, ...e.others.values()].flatMap((r) => r.inference() ?? []) : []
    if (models.length === 0)
      throw new BundleError(
        'E_HTTP_NOT_FOUND',
        `unknown model "${name}"${e ? ` (${e.state.toLowerCase()}${e.reason ? `: ${e.reason}` : ''})` : ''}`,
      )
    if (version === undefined) return models[0]!
    const m = models.find((x) => x.version === version)
    if (m === undefined)
      throw new BundleError(
        'E_HTTP_NOT_FOUND',
        `model "${name}" has no version "${version}" loaded (loaded: ${models.map((x) => x.version).join(', ')})`,
      )
    return m
  }

  private serially<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(name) ?? Promise.resolve()
    const next = prev.catch(() => undefined).then(fn)
    this.locks.set(name, next)
    return next
  }

  /** Loads `name` (a loaded model's name, or a model name in the store) at `version`. */
  load(name: string, req: LoadRequest = {}): Promise<InferenceModel> {
    const config = req.config === undefined ? undefined : validateOverrides(`load ${name}: config`, req.config)
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
      const entry = this.entries.get(name)
      const modelName = entry?.primary.versions.model?.name ?? entry?.primary.versions.tag.split(/[:@]/)[0] ?? name
      const tag = this.resolve(modelName, req.version)
      if (entry === undefined) {
        const runner = new OnnxRunner(tag, { name, ...(this.o.home ? { home: this.o.home } : {}) })
        if (config) runner.configure(config)
        this.o.attach(runner)
        const e: Entry = { primary: runner, others: new Map(), declared: false, state: 'LOADING' }
        this.entries.set(name, e)
        try {
          await runner.start()
        } catch (err) {
          this.entries.delete(name)
          await runner.stop().catch(() => undefined)
          throw err
        }
        e.state = 'READY'
        return runner.inference()!
      }
      if (config) entry.primary.configure(config)
      if (entry.state === 'UNAVAILABLE') {
        // Unloaded earlier: start it again (on the requested version).
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
      if (req.keep) {
        const other = new OnnxRunner(tag, { name, ...(this.o.home ? { home: this.o.home } : {}), ...(config ?? {}) })
        this.o.attach(other)
        try {
          await other.start()
        } catch (err) {
          await other.stop().catch(() => undefined)
          throw err
        }
        entry.others.set(other.model!.version, other)
        return other.inference()!
      }
      await entry.primary.versions.swap(tag)
      return entry.primary.inference()!
    })
  }

  /** Unloads a model (all its versions, or one): its workers stop once their queued requests are answered. */
  unload(name: string, version?: string): Promise<void> {
    if (this.ensembles.has(name))
      return Promise.reject(
        new BundleError('E_INPUT_INVALID', `"${name}" is an ensemble of this service; unload its step models instead`),
      )
    return this.serially(name, async () => {
      const entry = this.entries.get(name)
      if (entry === undefined || entry.state === 'UNAVAILABLE')
        throw new BundleError('E_HTTP_NOT_FOUND', `model "${name}" is not loaded`)
      if (version !== undefined && version !== entry.primary.versions.model?.version) {
        const other = entry.others.get(version)
        if (other === undefined)
          throw new BundleError('E_HTTP_NOT_FOUND', `model "${name}" has no version "${version}" loaded`)
        entry.others.delete(version)
        await other.stop()
        return
      }
      entry.state = 'UNLOADING'
      const all = [entry.primary, ...entry.others.values()]
      entry.others.clear()
      await Promise.all(all.map((r) => r.stop()))
      if (entry.declared) {
        entry.state = 'UNAVAILABLE'
        entry.reason = 'unloaded'
      } else this.entries.delete(name)
    })
  }

  /** The repository index: every onnx model in the store with its state here. */
  index(): { name: string; version: string; state: string; reason?: string }[] {
    const store = ModelStore.open(this.o.home ? { home: this.o.home } : {})
    let stored: { name: string; version: string }[]
    try {
      stored = store.summaries().filter((m) => m.framework === 'onnx')
    } finally {
      store.close()
    }
    const rows = new Map<string, { name: string; version: string; state: string; reason?: string }>()
    for (const m of stored)
      rows.set(`${m.name}:${m.version}`, { name: m.name, version: m.version, state: 'UNAVAILABLE' })
    for (const [name, e] of this.entries) {
      for (const r of [e.primary, ...e.others.values()]) {
        const version = r.versions.model?.version ?? ''
        const idle = e.state === 'READY' && !r.health().loaded
        const state = idle ? 'UNAVAILABLE' : r === e.primary ? e.state : 'READY'
        const reason = idle ? 'unloaded while idle; loads on the next request' : r === e.primary ? e.reason : undefined
        rows.set(`${name}:${version}`, { name, version, state, ...(reason ? { reason } : {}) })
      }
    }
    for (const [name, e] of this.ensembles) {
      const ready = e.ready()
      rows.set(`${name}:1`, {
        name,
        version: '1',
        state: ready ? 'READY' : 'UNAVAILABLE',
        ...(ready ? {} : { reason: 'a step model is not ready' }),
      })
    }
    return [...rows.values()].sort((a, b) =>
      a.name === b.name ? (a.version < b.version ? -1 : 1) : a.name < b.name ? -1 : 1,
    )
  }

  /** Dynamically loaded runners (for metrics sources and shutdown). */
  loaded(): VersionedRunner[] {
    return [...this.entries.values()].flatMap((e) => [...(e.declared ? [] : [e.primary]), ...e.others.values()])
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.loaded().map((r) => r.stop().catch(() => undefined)))
  }

  /** The exact tag of `name` at `version` (newest when not given), checked against the store. */
  private resolve(name: string, version?: string): string {
    const store = ModelStore.open(this.o.home ? { home: this.o.home } : {})
    try {
      return store.get(version === undefined ? name : `${name}:${version}`).tag
    } catch (err) {
      if (isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND')
        throw new BundleError('E_HTTP_NOT_FOUND', (err as Error).message)
      throw err
    } finally {
      store.close()
    }
  }
}
