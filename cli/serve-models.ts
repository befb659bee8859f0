import semver from 'semver'
import { BundleError } from '../errors/index.js'
import type { ServedModel, ServiceDefinition } from '../framework/index.js'
import type { ModelSummary } from '../store/index.js'

const globRegex = (glob: string): RegExp =>
  new RegExp(
    `^${glob
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  )

/**
 * The store's ONNX models that `--models` names: a comma-separated list of names or globs
 * (`ocr-*`, `*` for the whole store), each optionally with `:version` or `@semver-range`. A
 * glob takes every model whose name matches and has such a version; a plain name must be there.
 *
 * @example
 * selectModels('ocr-*@^1,vad', summaries) // [{ name: 'ocr-cls', tag: 'ocr-cls@^1' }, …, { name: 'vad', tag: 'vad' }]
 */
export function selectModels(patterns: string, stored: readonly ModelSummary[]): ServedModel[] {
  const onnx = stored.filter((m) => m.framework === 'onnx')
  const names = [...new Set(onnx.map((m) => m.name))].sort()
  const out = new Map<string, ServedModel>()
  const parts = patterns
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
  if (parts.length === 0) throw usage('--models needs a model name, a glob such as "ocr-*", or "*" for the whole store')
  for (const part of parts) {
    const m = /^([^:@]+)(?:([:@])(.+))?$/.exec(part)
    if (m === null) throw usage(`--models "${part}" is not NAME, NAME:VERSION, NAME@RANGE or a glob such as "ocr-*"`)
    const [, glob, sep, spec] = m as unknown as [string, string, string | undefined, string | undefined]
    if (sep === '@' && semver.validRange(spec!) === null)
      throw usage(`--models "${part}": "${spec}" is not a semver range (e.g. ^1.2, ~1.2.3, >=1 <2)`)
    const wild = /[*?]/.test(glob)
    const matching = names.filter((n) => globRegex(glob).test(n))
    const fits = (name: string) =>
      onnx.some(
        (x) =>
          x.name === name &&
          (sep === undefined ||
            (sep === ':' ? x.version === spec || x.version.startsWith(spec!) : semver.satisfies(x.version, spec!))),
      )
    const chosen = matching.filter(fits)
    if (chosen.length === 0) {
      if (glob === '*' && sep === undefined) continue // an empty store: nothing to load yet
      throw usage(
        matching.length && !wild
          ? `--models "${part}": the store has ${glob}, but no version of it is ${spec}`
          : `--models "${part}" matches no ONNX model in the store${names.length ? ` (it has ${list(names)})` : ''}`,
      )
    }
    for (const name of chosen) out.set(name, { name, tag: sep === undefined ? name : `${name}${sep}${spec}` })
  }
  return [...out.values()]
}

/** Whether a model name is one `--models` names (its globs; versions aside): what the server may load. */
export function modelFilter(patterns: string): (name: string) => boolean {
  const globs = patterns
    .split(',')
    .map((p) => p.trim().split(/[:@]/)[0]!)
    .filter(Boolean)
    .map(globRegex)
  return (name) => globs.some((g) => g.test(name))
}

const list = (names: string[]) => (names.length > 8 ? `${names.slice(0, 8).join(', ')}, …` : names.join(', '))
const usage = (msg: string) => new BundleError('E_CLI_USAGE', msg)

/** What `bundle serve --models` runs when no service is given: no APIs of its own, only the models. */
export async function storeService(): Promise<ServiceDefinition> {
  const { defineService } = await import('../framework/index.js')
  return defineService({ name: 'models', apis: {}, modelsOnly: true })
}

/** The store's models that `--models` names (serve and worker), checked before anything starts. */
export async function servedModels(patterns: string): Promise<ServedModel[]> {
  const { ModelStore } = await import('../store/index.js')
  const store = ModelStore.open()
  try {
    return selectModels(patterns, store.summaries())
  } finally {
    store.close()
  }
}
