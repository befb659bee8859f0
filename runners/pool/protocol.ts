import type { WireError } from '../../errors/index.js'
import type { TraceCarrier, TracingSettings } from '../tracing/index.js'

/**
 * The messages between the API process and a runner worker, as one typed union each way
 * (child_process IPC with the 'advanced' serializer, so tensors travel as raw bytes — typed
 * arrays — never as JSON number arrays; a worker thread gets the same messages by postMessage).
 * Tensors of 64 KiB or more travel through a shared-memory file instead; the message then
 * lists where their bytes are (ShmSlot).
 */

/** A dense tensor on the wire: `data` holds the raw little-endian bytes. */
export interface WireTensor {
  dtype: string
  shape: number[]
  data: Uint8Array
}

/**
 * A tensor whose bytes are several pieces in order (a batch's requests, row after row): the
 * pool writes the pieces straight into the worker's shared-memory file, so a batch is never
 * first copied into a buffer of its own. Only the API side holds these; the worker sees a
 * WireTensor. Without shared memory the pieces are joined into one before they are sent.
 */
export interface GatheredTensor {
  dtype: string
  shape: number[]
  parts: Uint8Array[]
}

export const isGathered = (v: unknown): v is GatheredTensor =>
  typeof v === 'object' &&
  v !== null &&
  Array.isArray((v as GatheredTensor).parts) &&
  typeof (v as GatheredTensor).dtype === 'string'

/** The same tensor with its pieces joined (for IPC without shared memory). */
export function joined(t: GatheredTensor): WireTensor {
  if (t.parts.length === 1) return { dtype: t.dtype, shape: t.shape, data: t.parts[0]! }
  const data = new Uint8Array(t.parts.reduce((n, p) => n + p.byteLength, 0))
  let at = 0
  for (const p of t.parts) {
    data.set(p, at)
    at += p.byteLength
  }
  return { dtype: t.dtype, shape: t.shape, data }
}

/**
 * Where one tensor's bytes sit in the worker's shared-memory file. `path` leads to the tensor
 * inside the message's args (or value); its `data` is empty there until the receiver reads them.
 */
export interface ShmSlot {
  path: (string | number)[]
  offset: number
  length: number
}

/**
 * What a runner worker runs: a backend module, named by file, that the worker imports and asks to
 * `load(options)`. The worker knows nothing else of it — ONNX models (`runners/onnx/backend.ts`),
 * stateful ONNX models (`runners/sequence/backend.ts`) and a user's TypeScript class
 * (`runners/custom/backend.ts`) are three such modules, and a new kind of runner is one more file
 * anywhere (see `backendRunner`). `options` crosses the process boundary as a structured clone.
 */
export interface BackendSpec {
  /** The module's absolute path (TypeScript is loaded through tsx). */
  module: string
  options?: unknown
}

export type ParentMessage =
  /** `shm`: the shared-memory file tensor bytes travel through (see shm.ts); absent: all inline. */
  | {
      type: 'init'
      runner: string
      index: number
      backend: BackendSpec
      shm?: string
      /** Tensors this size or more go through `shm` (BUNDLE_IPC_SHM_MIN_BYTES in the API process). */
      shmMinBytes?: number
      /** Tracing is on in the API process: the worker exports its own spans there too. */
      tracing?: TracingSettings
    }
  /**
   * `region`: where in the shared-memory file this call's tensors go (one region per call in
   * flight); `shm`: the tensors of `args` whose bytes are there.
   */
  | {
      type: 'run'
      id: number
      method: string
      args: unknown
      region?: number
      shm?: ShmSlot[]
      /** The traced requests in this call (their batch spans): the worker's execute spans join their traces. */
      trace?: TraceCarrier[]
    }
  | { type: 'shutdown' }
  /** A lone request is on its way to this idle worker: stay awake up to `ms` for its 'run' (hot-wait.ts). */
  | { type: 'wake'; ms: number }

export type WorkerMessage =
  /** `shm`: the worker opened the shared-memory file; without it every call stays inline. */
  | { type: 'ready'; methods: string[]; shm: boolean }
  /** A coded error (catalog code, details) keeps its code across the boundary; see errors/wire.ts. */
  | ({ type: 'init-error' } & WireError)
  /** `ms`: how long the call ran in the worker (the batcher learns compute time from it, not the round trip). */
  | { type: 'result'; id: number; value: unknown; ms: number; shm?: ShmSlot[] }
  | ({ type: 'error'; id: number } & WireError)

/** The command line a worker runs under; `ps` shows which runner it serves. */
export const workerTitle = (runner: string, index: number): string => `bundle-runner-worker ${runner}#${index}`
