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
 * The ONNX backend's method (ONNX_RUN): one batch's input tensors by name, optionally the
 * outputs to compute (all by default); it answers every output as a WireTensor. A local pool
 * may be handed GatheredTensors, which reach the worker as WireTensors.
 */
export const ONNX_RUN = 'run'
export interface OnnxRunArgs {
  inputs: Record<string, WireTensor | GatheredTensor>
  outputs?: string[]
}
export type OnnxRunResult = Record<string, WireTensor>

/** A sequence's id, as its caller names it (Triton's sequence_id: a number or a string). */
export type SequenceId = string | number

/** One row of a sequence batch: whose frame it is, and whether it starts or ends its sequence. */
export interface SequenceRow {
  id: SequenceId
  start: boolean
  end: boolean
}

/**
 * A stateful model's state, as its worker keeps it between calls: which output feeds which
 * input on the sequence's next frame, the axis rows stack along, and one sequence's shape (batch
 * axis 1) and dtype for the zeros a start frame begins from.
 */
export interface StateSpec {
  input: string
  output: string
  batchAxis: number
  dtype: string
  shape: number[]
}

/** What a sequence runner's worker needs beyond the model: its state and the constants fed to every batch. */
export interface SequenceSpec {
  state: StateSpec[]
  constants: Record<string, WireTensor>
  /** [input, output] dimension the non-state tensors' rows run along. */
  batchDims: [number, number]
}

/**
 * The sequence batcher's method (SEQUENCE_RUN): one frame per row, from different sequences,
 * non-state inputs stacked as ONNX_RUN has them. The worker stacks each row's state beside them
 * (zeros on a start), runs the model, keeps each row's new state (frees it on an end) and
 * answers the non-state outputs of the rows it ran. `missing`: rows it did not run, their
 * sequence having no state in this worker and no start flag.
 */
export const SEQUENCE_RUN = 'sequence-run'
export interface SequenceRunArgs {
  inputs: Record<string, WireTensor | GatheredTensor>
  rows: SequenceRow[]
}
export interface SequenceRunResult {
  outputs: Record<string, WireTensor>
  missing: number[]
}
/** Frees the state of these sequences (evicted while idle); answers how many it held. */
export const SEQUENCE_FREE = 'sequence-free'
export interface SequenceFreeArgs {
  ids: SequenceId[]
}

/** What a worker loads. `sequence`: a stateful model, served by SEQUENCE_RUN. */
export type BackendSpec =
  | { kind: 'custom'; module: string; exportName: string }
  | {
      kind: 'onnx'
      modelPath: string
      executionProviders?: string[]
      intraOpThreads?: number
      sequence?: SequenceSpec
    }

export type ParentMessage =
  /** `shm`: the shared-memory file tensor bytes travel through (see shm.ts); absent: all inline. */
  | {
      type: 'init'
      runner: string
      index: number
      backend: BackendSpec
      shm?: string
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
