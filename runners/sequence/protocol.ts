import { siblingModule } from '../pool/backend.js'
import type { BackendSpec, GatheredTensor, WireTensor } from '../pool/protocol.js'
import type { SequenceBackendOptions } from './backend.js'

// What the API side knows of the sequence backend (./backend.ts, loaded only in workers): its
// module and options, its methods' names and messages.

export const sequenceBackend = (options: SequenceBackendOptions): BackendSpec => ({
  module: siblingModule(new URL('./backend.js', import.meta.url)),
  options,
})

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
