import { BundleError } from '../../errors/index.js'
import type { TensorSpec } from '../inference.js'
import { rowsRequest } from '../onnx/batch.js'
import type { WireTensor } from '../pool/protocol.js'
import type { SequenceId, SequenceSpec, StateSpec } from './protocol.js'
import { type RunnerTensor, TYPED_ARRAYS, toWire } from '../tensor.js'

export type { SequenceId } from './protocol.js'

/** One state tensor of a stateful model: the output that becomes this input on the sequence's next frame. */
export interface SequenceStateOptions {
  /** The model input the state is fed to (e.g. Silero VAD's `h`). */
  input: string
  /** The model output that holds the next state (e.g. `hn`). */
  output: string
  /** The axis one sequence's rows sit on in this state tensor (default 0; Silero's [2, batch, 64] has 1). */
  batchAxis?: number
  /**
   * One sequence's state shape, batch axis included as 1 (e.g. [2, 1, 64]). Needed only when the
   * model declares a variable dimension there besides the batch axis; a start frame begins from
   * zeros of this shape.
   */
  shape?: number[]
}

/**
 * A stateful model served by the sequence batcher: frames of one sequence run in order on the
 * worker that holds its state, frames of different sequences share batches.
 *
 * @example
 * const sequence: SequenceOptions = {
 *   state: [{ input: 'h', output: 'hn', batchAxis: 1 }, { input: 'c', output: 'cn', batchAxis: 1 }],
 *   constants: { sr: { dtype: 'int64', shape: [1], data: new BigInt64Array([16000n]) } },
 *   idleTimeoutMs: 60_000,
 * }
 */
export interface SequenceOptions {
  /** Which outputs feed which inputs on the next frame of the same sequence. */
  state: SequenceStateOptions[]
  /** Inputs fed to every batch as they are (inputs without a batch dimension, e.g. a sample rate). */
  constants?: Record<string, RunnerTensor>
  /**
   * A sequence idle longer than this is evicted and its state freed; its next frame then needs
   * `start` (default 60 000 ms).
   */
  idleTimeoutMs?: number
}

/** Where a call belongs in a stateful model's stream of calls (Triton's sequence_id, sequence_start, sequence_end). */
export interface SequenceFrame {
  /** The sequence's id (a client, a stream): a string, or a safe integer. */
  id: SequenceId
  /** The first frame: the state starts from zeros (a live sequence with this id starts over). */
  start?: boolean
  /** The last frame: the state is freed once this frame has run. */
  end?: boolean
}

/**
 * What a call of a runner may say besides its inputs.
 *
 * @example
 * await vad.run({ input: frame }, { sequence: { id: 'client-42', start: true } })
 */
export interface RunOptions {
  /** Required by a runner declared with `sequence`, refused by any other. */
  sequence?: SequenceFrame
}

export const DEFAULT_SEQUENCE_IDLE_MS = 60_000

const config = (msg: string) => new BundleError('E_SERVE_CONFIG_INVALID', msg)
const names = (specs: readonly TensorSpec[]) => specs.map((s) => `"${s.name}"`).join(', ')

/**
 * The frame of a call, checked: a sequence runner's calls each name their sequence (its id a
 * string or a safe integer, its flags booleans); no other runner's may. Undefined for a plain call.
 */
export function frameOf(
  runner: string,
  declared: SequenceOptions | undefined,
  f: unknown,
): Required<SequenceFrame> | undefined {
  const bad = (why: string) => new BundleError('E_SEQUENCE_INVALID', `runner ${runner}${why}`)
  if (declared === undefined) {
    if (f === undefined) return undefined
    throw bad(' is not a sequence runner (declared without a `sequence` option): call it without one')
  }
  if (f === undefined) throw bad(' serves a stateful model: pass { sequence: { id, start, end } } with every call')
  if (typeof f !== 'object' || f === null) throw bad(': sequence must be { id, start?, end? }')
  const { id, start, end } = f as Record<string, unknown>
  const okId =
    (typeof id === 'string' && id.length > 0 && id.length <= 256) ||
    (typeof id === 'number' && Number.isSafeInteger(id))
  if (!okId)
    throw bad(`: sequence.id must be a string of 1 to 256 characters or a safe integer, got ${JSON.stringify(id)}`)
  if (start !== undefined && typeof start !== 'boolean') throw bad(': sequence.start must be true or false')
  if (end !== undefined && typeof end !== 'boolean') throw bad(': sequence.end must be true or false')
  return { id: id as SequenceId, start: start === true, end: end === true }
}

/**
 * One frame's inputs on the wire: one row along `inDim`, none of them a tensor the runner feeds
 * itself (a state or a constant). `key`: frames share a batch only with the same key.
 */
export function frameRequest(
  runner: string,
  inputs: Record<string, RunnerTensor>,
  spec: SequenceSpec,
  inDim: number,
): { wire: Record<string, WireTensor>; key: string } {
  const bad = (why: string) => new BundleError('E_SEQUENCE_INVALID', `runner ${runner}: ${why}`)
  for (const name of Object.keys(inputs))
    if (spec.state.some((s) => s.input === name) || name in spec.constants)
      throw bad(`input "${name}" is fed by the runner itself (sequence state or constant); leave it out`)
  const { wire, rows, key } = rowsRequest(runner, inputs, inDim)
  if (rows !== 1) throw bad(`a sequence frame is one row (dimension ${inDim} of size 1), got ${rows}`)
  return { wire, key }
}

/**
 * The worker's sequence spec from the user's options and the model's signature: each state's
 * dtype and one sequence's shape (the batch axis 1; zeros of it start a sequence), the
 * constants on the wire. Every mistake is a configuration error that names the fix.
 */
export function resolveSequence(
  runner: string,
  o: SequenceOptions,
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] },
  batchDims: [number, number],
): SequenceSpec {
  if (!Array.isArray(o.state) || o.state.length === 0)
    throw config(`runner ${runner}: sequence.state must list the model's state inputs and outputs`)
  const state = o.state.map((s, i): StateSpec => {
    const where = `runner ${runner}: sequence.state[${i}]`
    const input = signature.inputs.find((t) => t.name === s.input)
    if (input === undefined)
      throw config(`${where}: the model has no input "${s.input}" (it has ${names(signature.inputs)})`)
    if (!signature.outputs.some((t) => t.name === s.output))
      throw config(`${where}: the model has no output "${s.output}" (it has ${names(signature.outputs)})`)
    if (!(input.dtype in TYPED_ARRAYS)) throw config(`${where}: state "${s.input}" is ${input.dtype}, not numeric`)
    const axis = s.batchAxis ?? 0
    if (!Number.isSafeInteger(axis) || axis < 0 || axis >= input.shape.length)
      throw config(`${where}: batchAxis ${axis} is not an axis of "${s.input}" [${input.shape.join(', ')}]`)
    const shape = s.shape ?? input.shape.map((d, k) => (k === axis ? 1 : d))
    const fits =
      shape.length === input.shape.length &&
      shape[axis] === 1 &&
      shape.every(
        (d, k) => Number.isSafeInteger(d) && d > 0 && (input.shape[k]! < 0 || k === axis || d === input.shape[k]),
      )
    if (!fits)
      throw config(
        `${where}: one sequence's state of "${s.input}" would have shape [${shape.join(', ')}]; the model declares ` +
          `[${input.shape.join(', ')}] (-1 = variable): give sequence.state[${i}].shape with every size, ` +
          `${axis === 0 ? 'the first' : `axis ${axis}`} as 1`,
      )
    return { input: s.input, output: s.output, batchAxis: axis, dtype: input.dtype, shape }
  })
  const stateInputs = new Set(state.map((s) => s.input))
  if (stateInputs.size !== state.length) throw config(`runner ${runner}: sequence.state names an input twice`)
  const constants = Object.fromEntries(
    Object.entries(o.constants ?? {}).map(([name, t]) => {
      if (!signature.inputs.some((x) => x.name === name))
        throw config(`runner ${runner}: sequence.constants.${name}: the model has no such input`)
      if (stateInputs.has(name)) throw config(`runner ${runner}: sequence.constants.${name} is also a state input`)
      return [name, toWire(t)]
    }),
  )
  const idle = o.idleTimeoutMs ?? DEFAULT_SEQUENCE_IDLE_MS
  if (!(idle > 0) || !Number.isFinite(idle))
    throw config(`runner ${runner}: sequence.idleTimeoutMs must be a positive number of milliseconds`)
  return { state, constants, batchDims }
}

/** What callers send and get: the model's inputs less state and constants, its outputs less state. */
export function frameSignature(
  signature: { inputs: TensorSpec[]; outputs: TensorSpec[] },
  spec: SequenceSpec,
): { inputs: TensorSpec[]; outputs: TensorSpec[] } {
  const fed = new Set([...spec.state.map((s) => s.input), ...Object.keys(spec.constants)])
  const kept = new Set(spec.state.map((s) => s.output))
  return {
    inputs: signature.inputs.filter((t) => !fed.has(t.name)),
    outputs: signature.outputs.filter((t) => !kept.has(t.name)),
  }
}
