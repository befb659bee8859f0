import { existsSync } from 'node:fs'
import { dirname, isAbsolute, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { BackendSpec, WireTensor } from './protocol.js'

export type { BackendSpec }

/** Which worker is loading (a backend may name its logs or pick a device by it). */
export interface BackendContext {
  runner: string
  index: number
}

/** A method the pool calls by name: its args as sent (tensors as WireTensor), its answer sent back. */
export type BackendMethod = (args: unknown) => unknown

/** What `load` answers: the methods the pool may call, and how their tensors travel. */
export interface Backend {
  methods: Record<string, BackendMethod>
  /**
   * True when a method has read its input tensors' bytes by the time it resolves (onnxruntime's
   * run has): the worker may then read the next call's inputs into the same memory instead of
   * fresh buffers. Leave it unset when a method may keep a reference to its inputs.
   */
  releasesInputs?: boolean
  /**
   * The tensors of a method's answer, so that a worker thread moves their bytes rather than copying
   * them. Default: the answer's own values that are tensors (`{ name: WireTensor }`).
   */
  tensorsOf?(value: unknown): WireTensor[]
}

/** The contract of a backend module: a named export `load`. */
export interface BackendModule {
  load(options: unknown, context: BackendContext): Backend | Promise<Backend>
}

export const isWireTensor = (v: unknown): v is WireTensor =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as WireTensor).dtype === 'string' &&
  Array.isArray((v as WireTensor).shape) &&
  (v as WireTensor).data instanceof Uint8Array

/** The default `tensorsOf`: the top-level tensors of an answer shaped `{ name: tensor }`. */
export function ownTensors(value: unknown): WireTensor[] {
  if (typeof value !== 'object' || value === null) return []
  return Object.values(value).filter(isWireTensor)
}

/**
 * The file of a backend that sits beside the calling module (`new URL('./backend.js',
 * import.meta.url)`): the compiled .js in dist/, the .ts source when running from source (tests).
 */
export function siblingModule(url: URL): string {
  const js = fileURLToPath(url)
  if (existsSync(js) || !js.endsWith('.js')) return js
  const ts = `${js.slice(0, -3)}.ts`
  return compiledTwin(ts) ?? ts
}

/**
 * Running from source, the compiled twin in dist/ of a source file a worker loads, when
 * BUNDLE_WORKERS_FROM names that dist/ folder: scripts/test.mjs sets it after checking that every
 * source file there is compiled from its current text. The same code, without tsx starting in
 * every worker (about 0.3 s of a core each, and a test run starts hundreds of workers).
 */
export function compiledTwin(ts: string): string | undefined {
  const dist = process.env.BUNDLE_WORKERS_FROM
  if (!dist || !ts.endsWith('.ts')) return undefined
  const inside = relative(dirname(dist), ts)
  if (inside.startsWith('..') || isAbsolute(inside)) return undefined
  const js = join(dist, `${inside.slice(0, -3)}.js`)
  return existsSync(js) ? js : undefined
}
