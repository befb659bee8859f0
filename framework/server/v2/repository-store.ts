import { BundleError, isBundleError } from '../../../errors/index.js'
import { ModelStore } from '../../../store/index.js'

// The store as the repository sees it: the ONNX models a server may load (`bundle serve
// --models` narrows them), and exact tags. Each question opens the store for that question
// only, so models saved while the server runs are seen at once and no handle is held.

export class RepositoryStore {
  constructor(
    private readonly home: string | undefined,
    private readonly servable: ((name: string) => boolean) | undefined,
  ) {}

  private with<T>(fn: (store: ModelStore) => T): T {
    const store = ModelStore.open(this.home ? { home: this.home } : {})
    try {
      return fn(store)
    } finally {
      store.close()
    }
  }

  /** Every ONNX model version this server may load. */
  models(): { name: string; version: string }[] {
    return this.with((s) =>
      s.summaries().filter((m) => m.framework === 'onnx' && (this.servable === undefined || this.servable(m.name))),
    )
  }

  /** Whether the store holds a loadable ONNX model of this name (asked on error paths only). */
  holds(name: string): boolean {
    if (this.servable && !this.servable(name)) return false
    try {
      return this.with((s) => s.summaries().some((m) => m.name === name && m.framework === 'onnx'))
    } catch {
      return false
    }
  }

  /** The exact name:version a tag resolves to now. */
  exactTag(tag: string): string {
    return this.with((s) => s.get(tag).tag)
  }

  /** The exact tag of `name` at `version` (newest when not given); an unknown one is E_MODEL_NOT_FOUND. */
  resolve(name: string, version?: string): string {
    try {
      return this.exactTag(version === undefined ? name : `${name}:${version}`)
    } catch (err) {
      if (isBundleError(err) && err.code === 'E_STORE_MODEL_NOT_FOUND')
        throw new BundleError(
          'E_MODEL_NOT_FOUND',
          version === undefined
            ? `the store has no model named ${name}; save it first ` +
                `(bundle models save path/to/model.onnx --name ${name})`
            : (err as Error).message,
        )
      throw err
    }
  }
}
