import type { WireTensor } from '../pool/protocol.js'
import {
  SEQUENCE_FREE,
  SEQUENCE_RUN,
  type SequenceFreeArgs,
  type SequenceRunArgs,
  type SequenceRunResult,
  type SequenceSpec,
} from './protocol.js'
import { concatRows, sliceRows } from '../tensor.js'
import { SequenceStates } from './state.js'

type Tensors = Record<string, WireTensor>

/**
 * A sequence runner's methods in its worker, around `run` (the model: feeds in, outputs out).
 * The worker entry adds them for an onnx backend with a `sequence` spec; they run one call at a
 * time there, so the state map needs no locking.
 */
export function sequenceMethods(
  spec: SequenceSpec,
  run: (feeds: Tensors) => Promise<Tensors>,
): Record<string, (args: unknown) => Promise<unknown>> {
  const states = new SequenceStates(spec)
  const stateOutputs = new Set(spec.state.map((s) => s.output))
  const [inDim] = spec.batchDims
  return {
    async [SEQUENCE_RUN](args: unknown): Promise<SequenceRunResult> {
      // A worker gets every tensor whole (gathered ones were written or joined on the way).
      const { inputs, rows } = args as SequenceRunArgs & { inputs: Tensors }
      const { live, missing } = states.plan(rows)
      if (live.length === 0) return { outputs: {}, missing }
      // Rows without state are left out of the run; the rest keep their order.
      const taken =
        missing.length === 0
          ? inputs
          : Object.fromEntries(
              Object.entries(inputs).map(([k, t]) => [
                k,
                concatRows(
                  live.map((i) => sliceRows(t, i, 1, inDim)),
                  inDim,
                ),
              ]),
            )
      const out = await run({ ...taken, ...spec.constants, ...states.feeds(rows, live) })
      states.keep(rows, live, out)
      const outputs = Object.fromEntries(Object.entries(out).filter(([k]) => !stateOutputs.has(k)))
      return { outputs, missing }
    },
    async [SEQUENCE_FREE](args: unknown): Promise<number> {
      return states.free((args as SequenceFreeArgs).ids)
    },
  }
}
