import type { WireTensor } from '../pool/protocol.js'
import type { SequenceId, SequenceRow, SequenceSpec } from './protocol.js'
import { concatRows, type RunnerDType, sliceRows, zeros } from '../tensor.js'

/**
 * The state of every sequence one worker serves, by sequence id: for each state tensor of the
 * model, that sequence's slice of it (its batch axis 1). It lives in the worker, beside the
 * model, so a frame carries only its own input over IPC — never the state, which for a
 * recurrent model can be many times larger than the frame. Pure: it stacks and splits
 * tensors, the model runs elsewhere (worker-methods.ts).
 */
export class SequenceStates {
  private readonly states = new Map<SequenceId, WireTensor[]>()
  /** A start frame's state: zeros of one sequence's shape (made once, never written to). */
  private readonly initial: WireTensor[]

  constructor(private readonly spec: SequenceSpec) {
    this.initial = spec.state.map((s) => zeros(s.dtype as RunnerDType, s.shape))
  }

  /** Sequences held now. */
  get size(): number {
    return this.states.size
  }

  has(id: SequenceId): boolean {
    return this.states.has(id)
  }

  /**
   * Which rows can run: a start, or a sequence this worker holds state for. Two rows of one
   * sequence in a batch would both read the same state: the API process never sends that, and
   * a batch that has it is refused whole rather than run wrong.
   */
  plan(rows: readonly SequenceRow[]): { live: number[]; missing: number[] } {
    const seen = new Set<SequenceId>()
    const live: number[] = []
    const missing: number[] = []
    rows.forEach((r, i) => {
      if (seen.has(r.id)) throw new Error(`sequence ${JSON.stringify(r.id)} has two frames in one batch`)
      seen.add(r.id)
      if (r.start || this.states.has(r.id)) live.push(i)
      else missing.push(i)
    })
    return { live, missing }
  }

  /** Each state input for the `live` rows, their slices stacked along its batch axis in row order. */
  feeds(rows: readonly SequenceRow[], live: readonly number[]): Record<string, WireTensor> {
    return Object.fromEntries(
      this.spec.state.map((s, k) => {
        const parts = live.map((i) => {
          const r = rows[i]!
          return r.start ? this.initial[k]! : this.states.get(r.id)![k]!
        })
        return [s.input, concatRows(parts, s.batchAxis)]
      }),
    )
  }

  /**
   * After a successful run: each live row's slice of every state output becomes its sequence's
   * state (copied: the output's buffer is the whole batch's), or is dropped on its end frame.
   * A failed run never reaches here, so a sequence's state only ever moves a whole frame.
   */
  keep(rows: readonly SequenceRow[], live: readonly number[], outputs: Record<string, WireTensor>): void {
    const next = live.map(() => [] as WireTensor[])
    for (const s of this.spec.state) {
      const t = outputs[s.output]
      if (t === undefined) throw new Error(`the model gave no state output "${s.output}"`)
      if (t.shape[s.batchAxis] !== live.length)
        throw new Error(
          `state output "${s.output}" has shape [${t.shape.join(', ')}]: expected ${live.length} rows along ` +
            `axis ${s.batchAxis}`,
        )
      live.forEach((_, j) => {
        const part = sliceRows(t, j, 1, s.batchAxis)
        // Along axis 0 the slice is a view of the batch's buffer: keep a copy of its own.
        next[j]!.push(s.batchAxis === 0 ? { ...part, data: part.data.slice() } : part)
      })
    }
    live.forEach((i, j) => {
      const r = rows[i]!
      if (r.end) this.states.delete(r.id)
      else this.states.set(r.id, next[j]!)
    })
  }

  /** Drops these sequences' state; answers how many were held. */
  free(ids: readonly SequenceId[]): number {
    let n = 0
    for (const id of ids) if (this.states.delete(id)) n++
    return n
  }
}
