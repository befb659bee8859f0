import type { SubmitOptions } from '../batching/dispatcher.js'
import type { WireTensor } from '../pool/protocol.js'
import type { SequenceId } from './protocol.js'
import type { HeldFrame } from './table.js'

type Request = Record<string, WireTensor>

/**
 * One call of a sequence runner on its way: its inputs (one row), where it belongs in its
 * sequence, and its caller's promise. It settles once — answered, or failed, possibly before
 * its batch runs (its sequence was lost meanwhile): such a frame is then left out of the batch.
 */
export class Frame implements HeldFrame {
  /** Answered or failed: later outcomes are ignored, a batch leaves it out. */
  done = false
  readonly promise: Promise<Request>
  private resolve!: (out: Request) => void
  private reject!: (err: unknown) => void

  constructor(
    readonly id: SequenceId,
    readonly wire: Request,
    /** Frames share a batch only with the same key (shapes and dtypes of their inputs). */
    readonly key: string,
    readonly start: boolean,
    readonly end: boolean,
    /** The caller's deadline, priority and the rest, for its worker's batcher. */
    readonly submit: SubmitOptions,
  ) {
    this.promise = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }

  answer(out: Request): void {
    if (this.done) return
    this.done = true
    this.resolve(out)
  }

  fail(err: unknown): void {
    if (this.done) return
    this.done = true
    this.reject(err)
  }
}
