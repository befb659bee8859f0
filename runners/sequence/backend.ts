// The sequence backend: an ONNX model whose state the worker keeps between a sequence's frames
// (runners/pool/backend.ts's contract). It answers ONNX_RUN as the onnx backend does, plus
// SEQUENCE_RUN and SEQUENCE_FREE around the same session.
import { type OnnxBackendOptions, onnxMethods, openSession } from '../onnx/backend.js'
import { type Backend, type BackendContext, ownTensors } from '../pool/backend.js'
import type { WireTensor } from '../pool/protocol.js'
import type { SequenceRunResult, SequenceSpec } from './protocol.js'
import { sequenceMethods } from './worker-methods.js'

export interface SequenceBackendOptions extends OnnxBackendOptions {
  sequence: SequenceSpec
}

/** A sequence batch answers its tensors one level down (SequenceRunResult.outputs). */
const isSequenceResult = (v: unknown): v is SequenceRunResult =>
  typeof v === 'object' &&
  v !== null &&
  Array.isArray((v as SequenceRunResult).missing) &&
  typeof (v as SequenceRunResult).outputs === 'object'

export async function load(options: unknown, _context: BackendContext): Promise<Backend> {
  const o = options as SequenceBackendOptions
  const session = await openSession(o)
  return {
    methods: { ...onnxMethods(session), ...sequenceMethods(o.sequence, (feeds) => session.run(feeds)) },
    // Inputs are read by the time a call resolves; the state kept is cut from outputs (state.ts).
    releasesInputs: true,
    tensorsOf: (value): WireTensor[] => ownTensors(isSequenceResult(value) ? value.outputs : value),
  }
}
