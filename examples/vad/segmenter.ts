import { FRAME_SAMPLES } from './frames.js'

// From one speech probability per frame to speech segments. A single threshold flickers on
// every syllable, so speech has two: it starts above a high one and only ends after a run of
// frames below a low one ("redemption"), long enough to bridge the pauses between words.

export interface SegmenterOptions {
  /** A frame at or above this starts speech. */
  positiveThreshold: number
  /** During speech, frames below this count toward its end; frames at or above it are speech. */
  negativeThreshold: number
  /** Consecutive low frames that end speech; the segment ends where they began. */
  redemptionFrames: number
  /** Segments shorter than this, counted from their first speech frame, are dropped unannounced. */
  minSpeechFrames: number
  /** Frames a segment's start is moved earlier, as onsets tend to score low. */
  preSpeechPadFrames: number
  /** Samples per frame and their rate: they turn frame indices into seconds. */
  frameSamples: number
  sampleRate: number
}

export const DEFAULT_SEGMENTER_OPTIONS: Readonly<SegmenterOptions> = Object.freeze({
  positiveThreshold: 0.5,
  negativeThreshold: 0.35,
  redemptionFrames: 8,
  minSpeechFrames: 3,
  preSpeechPadFrames: 1,
  frameSamples: FRAME_SAMPLES,
  sampleRate: 16000,
})

export interface SpeechEvent {
  event: 'speech_start' | 'speech_end'
  /** Seconds from the start of the audio. */
  time: number
}

/** A stretch of speech, in seconds from the start of the audio. */
export interface Segment {
  start: number
  end: number
}

/**
 * Feeds on one probability per frame, in order, and reports speech as it is confirmed.
 * `speech_start` comes once a segment has lasted `minSpeechFrames` (carrying the time it began),
 * `speech_end` once `redemptionFrames` low frames have passed (carrying the time they began),
 * so every event time lies in the past and a dropped blip never produces an event.
 *
 * @example
 * const seg = new SpeechSegmenter({ redemptionFrames: 5 })
 * for (const p of probabilities) for (const e of seg.push(p)) send(e)
 * for (const e of seg.flush()) send(e)
 * seg.segments // [{ start: 0.864, end: 2.304 }, …]
 */
export class SpeechSegmenter {
  readonly options: Readonly<SegmenterOptions>
  #segments: Segment[] = []
  #frame = 0 // index of the next frame
  #start = -1 // first speech frame of the open segment; -1 when none is open
  #lowFrom = -1 // first frame of the current run of low frames; -1 when the last frame was speech
  #confirmed = false // speech_start has been sent for the open segment
  #lastEnd = 0 // where the previous segment ended: padding never reaches back past it
  #flushed = false

  constructor(options: Partial<SegmenterOptions> = {}) {
    this.options = Object.freeze({ ...DEFAULT_SEGMENTER_OPTIONS, ...options })
    check(this.options)
  }

  /** Segments closed so far (all of them after flush()). */
  get segments(): readonly Segment[] {
    return this.#segments
  }

  /** Frames pushed so far. */
  get frames(): number {
    return this.#frame
  }

  /** Takes the next frame's probability; returns the events it confirms (usually none). */
  push(probability: number): SpeechEvent[] {
    if (this.#flushed) throw new Error('SpeechSegmenter: push() after flush(); use a new segmenter per stream')
    if (!(probability >= 0 && probability <= 1))
      throw new RangeError(`a speech probability lies in 0..1, got ${probability} for frame ${this.#frame}`)
    const o = this.options
    const i = this.#frame++
    if (this.#start < 0) {
      if (probability >= o.positiveThreshold) (this.#start = i), (this.#lowFrom = -1), (this.#confirmed = false)
      else return []
    } else if (probability < o.negativeThreshold) {
      if (this.#lowFrom < 0) this.#lowFrom = i
      return i + 1 - this.#lowFrom >= o.redemptionFrames ? this.#close(this.#lowFrom) : []
    } else this.#lowFrom = -1
    // A speech frame: the segment now reaches at least to i + 1.
    if (this.#confirmed || i + 1 - this.#start < o.minSpeechFrames) return []
    this.#confirmed = true
    return [{ event: 'speech_start', time: this.#seconds(this.#paddedStart()) }]
  }

  /**
   * Ends the stream, closing an open segment where its speech stopped. Pass the audio's true
   * duration when the last frame was zero-padded, so no segment ends after the audio does.
   */
  flush(duration?: number): SpeechEvent[] {
    if (this.#flushed) return []
    const events = this.#start < 0 ? [] : this.#close(this.#lowFrom < 0 ? this.#frame : this.#lowFrom)
    this.#flushed = true
    if (duration !== undefined && events.length > 0) {
      const last = this.#segments[this.#segments.length - 1]!
      last.end = Math.max(last.start, Math.min(last.end, duration))
      events[0]!.time = last.end
    }
    return events
  }

  #close(end: number): SpeechEvent[] {
    const start = this.#paddedStart()
    const kept = this.#confirmed // confirmation is exactly "lasted minSpeechFrames"
    this.#start = -1
    this.#lowFrom = -1
    this.#confirmed = false
    if (!kept) return []
    this.#lastEnd = end
    this.#segments.push({ start: this.#seconds(start), end: this.#seconds(end) })
    return [{ event: 'speech_end', time: this.#seconds(end) }]
  }

  #paddedStart(): number {
    return Math.max(0, this.#lastEnd, this.#start - this.options.preSpeechPadFrames)
  }

  #seconds(frame: number): number {
    return (frame * this.options.frameSamples) / this.options.sampleRate
  }
}

/**
 * Segments a whole recording's probabilities at once.
 *
 * @example
 * const { segments } = segmentSpeech([0.1, 0.9, 0.9, 0.8, 0.1], {}, 5 * 0.096)
 */
export function segmentSpeech(
  probabilities: ArrayLike<number>,
  options: Partial<SegmenterOptions> = {},
  duration?: number,
): { events: SpeechEvent[]; segments: Segment[] } {
  const seg = new SpeechSegmenter(options)
  const events: SpeechEvent[] = []
  for (let i = 0; i < probabilities.length; i++) events.push(...seg.push(probabilities[i]!))
  events.push(...seg.flush(duration))
  return { events, segments: [...seg.segments] }
}

function check(o: SegmenterOptions): void {
  const bad = (what: string) => {
    throw new RangeError(`SpeechSegmenter: ${what}`)
  }
  if (!(o.positiveThreshold > 0 && o.positiveThreshold <= 1)) bad('positiveThreshold must lie in (0, 1]')
  if (!(o.negativeThreshold >= 0 && o.negativeThreshold <= o.positiveThreshold))
    bad('negativeThreshold must lie in [0, positiveThreshold]')
  for (const k of ['redemptionFrames', 'minSpeechFrames', 'frameSamples'] as const)
    if (!Number.isInteger(o[k]) || o[k] < 1) bad(`${k} must be a positive integer, got ${o[k]}`)
  if (!Number.isInteger(o.preSpeechPadFrames) || o.preSpeechPadFrames < 0)
    bad(`preSpeechPadFrames must be a non-negative integer, got ${o.preSpeechPadFrames}`)
  if (!(o.sampleRate > 0)) bad(`sampleRate must be positive, got ${o.sampleRate}`)
}
