import type { WireError } from '../../errors/index.js'

/**
 * The messages between the API process and a runner worker, as one typed union each way
 * (child_process IPC with the 'advanced' serializer, so tensors travel as raw bytes — typed
 * arrays — never as JSON number arrays). Tensors of 256 KiB or more travel through a
 * shared-memory file instead; the message then holds a reference where their bytes were.
 */

/** A dense tensor on the wire: `data` holds the raw little-endian bytes. */
export interface WireTensor {
  dtype: string
  shape: number[]
  data: Uint8Array
}

/** What a worker loads. */
export type BackendSpec =
  | { kind: 'custom'; module: string; exportName: string }
  | { kind: 'onnx'; modelPath: string; executionProviders?: string[]; intraOpThreads?: number }

export type ParentMessage =
  /** `shm`: the shared-memory file tensor bytes travel through (see shm.ts); absent: all inline. */
  | { type: 'init'; runner: string; index: number; backend: BackendSpec; shm?: string }
  | { type: 'run'; id: number; method: string; args: unknown }
  | { type: 'shutdown' }

export type WorkerMessage =
  /** `shm`: the worker opened the shared-memory file; without it every call stays inline. */
  | { type: 'ready'; methods: string[]; shm: boolean }
  /** A coded error (catalog code, details) keeps its code across the boundary; see errors/wire.ts. */
  | ({ type: 'init-error' } & WireError)
  | { type: 'result'; id: number; value: unknown }
  | ({ type: 'error'; id: number } & WireError)

/** The command line a worker runs under; `ps` shows which runner it serves. */
export const workerTitle = (runner: string, index: number): string => `bundle-runner-worker ${runner}#${index}`
