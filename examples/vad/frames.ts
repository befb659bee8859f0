import { BundleError } from 'modelbundle'

// Silero VAD reads 16 kHz audio in fixed windows. Streamed audio arrives in chunks of whatever
// size the network chose, so the framer carries the remainder — even half a sample — from one
// chunk to the next.

/** Samples per frame: Silero VAD's 96 ms window at 16 kHz. */
export const FRAME_SAMPLES = 1536

/** Audio cut into frames. */
export interface Frames {
  frames: Float32Array[]
  /** Zero samples appended to the last frame to fill it (0 when the audio filled it). */
  padded: number
}

/**
 * Turns a stream of raw 16 kHz signed 16-bit little-endian PCM, in chunks of any size, into
 * frames of exactly `frameSamples` samples in −1..1.
 *
 * @example
 * const framer = new PcmFramer()
 * for await (const chunk of request.body) for (const frame of framer.push(chunk)) probs.push(await vad(frame))
 * const last = framer.flush() // the zero-padded tail, if any
 */
export class PcmFramer {
  readonly frameSamples: number
  #frame: Float32Array
  #filled = 0
  #oddByte = -1 // the low byte of a sample whose high byte is in the next chunk

  constructor(frameSamples = FRAME_SAMPLES) {
    if (!Number.isInteger(frameSamples) || frameSamples < 1)
      throw new RangeError(`frameSamples must be a positive integer, got ${frameSamples}`)
    this.frameSamples = frameSamples
    this.#frame = new Float32Array(frameSamples)
  }

  /** Samples held for the next frame. */
  get pending(): number {
    return this.#filled
  }

  /** Adds a chunk; returns the frames it completed (each a new array the caller may keep). */
  push(chunk: Uint8Array): Float32Array[] {
    const done: Float32Array[] = []
    let i = 0
    if (this.#oddByte >= 0 && chunk.length > 0) {
      this.#add(this.#oddByte | (chunk[0]! << 8), done)
      this.#oddByte = -1
      i = 1
    }
    for (; i + 1 < chunk.length; i += 2) this.#add(chunk[i]! | (chunk[i + 1]! << 8), done)
    if (i < chunk.length) this.#oddByte = chunk[i]!
    return done
  }

  /**
   * Ends the stream: the samples held, zero-padded to a whole frame, or undefined when none
   * are. A stream that stops halfway through a sample was not 16-bit PCM, and throws.
   */
  flush(): { frame: Float32Array; padded: number } | undefined {
    if (this.#oddByte >= 0)
      throw new BundleError(
        'E_INPUT_INVALID',
        'the PCM stream ended halfway through a sample (an odd number of bytes); send 16-bit little-endian samples',
      )
    if (this.#filled === 0) return undefined
    const padded = this.frameSamples - this.#filled
    const frame = this.#frame // the unfilled part is still zero: a fresh array is made per frame
    this.#frame = new Float32Array(this.frameSamples)
    this.#filled = 0
    return { frame, padded }
  }

  #add(u16: number, done: Float32Array[]): void {
    this.#frame[this.#filled++] = ((u16 << 16) >> 16) / 32768 // sign-extend the 16 bits
    if (this.#filled === this.frameSamples) {
      done.push(this.#frame)
      this.#frame = new Float32Array(this.frameSamples)
      this.#filled = 0
    }
  }
}

/**
 * Cuts whole audio into frames; the last one is zero-padded, and `padded` says by how much.
 *
 * @example
 * const { frames, padded } = cutFrames(toRate16k(samples, sampleRate))
 */
export function cutFrames(samples: Float32Array, frameSamples = FRAME_SAMPLES): Frames {
  if (!Number.isInteger(frameSamples) || frameSamples < 1)
    throw new RangeError(`frameSamples must be a positive integer, got ${frameSamples}`)
  const frames: Float32Array[] = []
  for (let at = 0; at < samples.length; at += frameSamples) {
    const frame = new Float32Array(frameSamples) // a copy: frames outlive and must not alias the input
    frame.set(samples.subarray(at, at + frameSamples))
    frames.push(frame)
  }
  const rest = samples.length % frameSamples
  return { frames, padded: rest === 0 ? 0 : frameSamples - rest }
}
