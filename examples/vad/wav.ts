import { BundleError } from 'modelbundle'

// WAV bodies as callers really send them: whatever sox, ffmpeg, browsers or phone recorders
// wrote — any PCM width, float, many channels, extra chunks, WAVE_FORMAT_EXTENSIBLE, streamed
// headers whose sizes were never filled in. Everything becomes mono float in −1..1, because
// that is what the VAD model reads.

/** Decoded audio: mono samples in −1..1 at the file's own rate. */
export interface Wav {
  sampleRate: number
  /** Channels in the file; `samples` is already their average. */
  channels: number
  samples: Float32Array
}

const PCM = 1
const FLOAT = 3
const EXTENSIBLE = 0xfffe
// The 14 bytes every KSDATAFORMAT_SUBTYPE_* GUID ends with; its first two bytes are the format code.
const GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71]
// Writers that cannot seek back (sox and ffmpeg to a pipe) leave a placeholder data size this
// large: such a chunk runs to the end of the body.
const UNKNOWN_SIZE = 0x7ffff000
const CONVERT = 'convert it with e.g. `sox in.mp3 -r 16000 -c 1 -b 16 out.wav`'

const invalid = (message: string) => new BundleError('E_INPUT_INVALID', message)

interface Format {
  code: number
  channels: number
  sampleRate: number
  blockAlign: number
  bits: number
}

/**
 * Decodes a RIFF/WAVE body: PCM 8/16/24/32-bit or IEEE float 32/64, any channel count
 * (averaged to mono), unknown chunks skipped. Anything else throws `E_INPUT_INVALID` with a
 * message that says what to send instead.
 *
 * @example
 * const { sampleRate, samples } = parseWav(new Uint8Array(await req.arrayBuffer()))
 * const pcm16k = toRate16k(samples, sampleRate)
 */
export function parseWav(body: Uint8Array): Wav {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength)
  const tag = (at: number) => String.fromCharCode(...body.subarray(at, at + 4))
  if (body.length < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE') throw invalid(notWav(body, tag))
  let format: Format | undefined
  let data: Uint8Array | undefined
  for (let at = 12; at + 8 <= body.length; ) {
    const id = tag(at)
    const size = view.getUint32(at + 4, true)
    const start = at + 8
    if (id === 'data' && start + size > body.length) {
      if (size < UNKNOWN_SIZE)
        throw invalid(
          `the WAV body is truncated: its data chunk declares ${size} bytes but only ${body.length - start} ` +
            'are present; send the whole file',
        )
      data = body.subarray(start)
      break
    }
    if (start + size > body.length)
      throw invalid(`the WAV body is truncated inside its "${id}" chunk; send the whole file`)
    if (id === 'fmt ') format = readFormat(view, start, size)
    else if (id === 'data') data = body.subarray(start, start + size)
    at = start + size + (size & 1) // chunks are padded to an even length
  }
  if (format === undefined) throw invalid('the WAV body has no "fmt " chunk, so its sample format is unknown')
  if (data === undefined) throw invalid('the WAV body has no "data" chunk: it holds no audio')
  return { sampleRate: format.sampleRate, channels: format.channels, samples: decode(data, format) }
}

/** Names what the body looks like instead, since "not a WAV" alone does not say how to fix it. */
function notWav(body: Uint8Array, tag: (at: number) => string): string {
  if (body.length < 12) return `the body is ${body.length} bytes, too short to be a WAV file; send audio/wav`
  if (tag(0) === 'RIFX') return `the WAV is big-endian (RIFX), which is not supported; ${CONVERT}`
  if (tag(0) === 'RF64') return `the WAV is RF64 (over 4 GB), which is not supported; send shorter audio`
  const known: Record<string, string> = { OggS: 'Ogg', fLaC: 'FLAC', ID3: 'MP3', ftyp: 'MP4/M4A', FORM: 'AIFF' }
  const kind = known[tag(0)] ?? known[tag(0).slice(0, 3)] ?? known[tag(4)]
  const mp3 = body[0] === 0xff && (body[1]! & 0xe0) === 0xe0 // an MPEG frame sync without ID3 tag
  const what = kind ?? (mp3 ? 'MP3' : undefined)
  return what === undefined
    ? `the body is not a WAV file (it does not start with RIFF…WAVE); send audio/wav or ${CONVERT}`
    : `the body looks like ${what}, not WAV; ${CONVERT}`
}

function readFormat(view: DataView, at: number, size: number): Format {
  if (size < 16) throw invalid(`the WAV "fmt " chunk is ${size} bytes, shorter than the 16 it needs`)
  let code = view.getUint16(at, true)
  const f = {
    channels: view.getUint16(at + 2, true),
    sampleRate: view.getUint32(at + 4, true),
    blockAlign: view.getUint16(at + 12, true),
    bits: view.getUint16(at + 14, true),
  }
  if (code === EXTENSIBLE) {
    if (size < 40) throw invalid('the WAV declares WAVE_FORMAT_EXTENSIBLE but its "fmt " chunk is too short')
    const guid = new Uint8Array(view.buffer, view.byteOffset + at + 24, 16)
    if (GUID_TAIL.some((b, i) => guid[i + 2] !== b))
      throw invalid(`the WAV's extensible sub-format is not PCM or float; ${CONVERT}`)
    code = view.getUint16(at + 24, true)
  }
  if (f.channels === 0) throw invalid('the WAV declares 0 channels')
  if (f.sampleRate === 0) throw invalid('the WAV declares a sample rate of 0 Hz')
  // Bytes per sample come from blockAlign: 20-bit audio, for one, sits in 3-byte containers.
  const width = f.blockAlign / f.channels
  const ok = code === PCM ? [1, 2, 3, 4].includes(width) : code === FLOAT ? width === 4 || width === 8 : false
  if (!ok) {
    const kind = code === PCM ? `${f.bits}-bit PCM` : code === FLOAT ? `${f.bits}-bit float` : `format code ${code}`
    throw invalid(
      `the WAV's sample format (${kind}, ${f.blockAlign} bytes per frame of ${f.channels} channels) is not ` +
        `supported: send 8/16/24/32-bit PCM or 32-bit float, or ${CONVERT}`,
    )
  }
  return { code, ...f }
}

function decode(data: Uint8Array, f: Format): Float32Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const width = f.blockAlign / f.channels
  // A trailing partial frame is what a cut-off stream leaves: drop it rather than invent samples.
  const frames = Math.floor(data.length / f.blockAlign)
  const read = reader(view, f.code, width)
  const out = new Float32Array(frames)
  for (let i = 0; i < frames; i++) {
    let sum = 0
    for (let c = 0; c < f.channels; c++) sum += read(i * f.blockAlign + c * width)
    out[i] = sum / f.channels
  }
  return out
}

function reader(view: DataView, code: number, width: number): (at: number) => number {
  if (code === FLOAT) {
    // One NaN or huge value would poison the VAD model's recurrent state for the rest of the
    // stream, so float input is held to what integer input can express.
    const clamp = (x: number) => (Number.isFinite(x) ? Math.max(-1, Math.min(1, x)) : 0)
    return width === 4 ? (at) => clamp(view.getFloat32(at, true)) : (at) => clamp(view.getFloat64(at, true))
  }
  switch (width) {
    case 1:
      return (at) => (view.getUint8(at) - 128) / 128 // 8-bit WAV is the one unsigned width
    case 2:
      return (at) => view.getInt16(at, true) / 32768
    case 3:
      return (at) => (view.getUint8(at) | (view.getUint8(at + 1) << 8) | (view.getInt8(at + 2) << 16)) / 8388608
    default:
      return (at) => view.getInt32(at, true) / 2147483648
  }
}

/** The rate the VAD model reads. */
export const VAD_RATE = 16000
export const MIN_RATE = 8000
export const MAX_RATE = 192000

// Windowed-sinc kernel, tabulated once: ZEROS zero crossings each side, RES points between
// crossings (linear interpolation between them stays far below 16-bit noise).
const ZEROS = 16
const RES = 512
// The pass band ends at this fraction of the lower Nyquist frequency, leaving the rest for the
// filter to roll off in, so little above 8 kHz folds back into speech when downsampling.
const ROLLOFF = 0.92
const KERNEL = (() => {
  const k = new Float64Array(ZEROS * RES + 2)
  k[0] = 1
  for (let i = 1; i < k.length; i++) {
    const x = i / RES
    const w = x >= ZEROS ? 0 : 0.42 + 0.5 * Math.cos((Math.PI * x) / ZEROS) + 0.08 * Math.cos((2 * Math.PI * x) / ZEROS)
    k[i] = (Math.sin(Math.PI * x) / (Math.PI * x)) * w // Blackman window: ~74 dB stop band
  }
  return k
})()

/**
 * Resamples mono audio to 16 kHz (band-limited windowed-sinc interpolation, which also filters
 * out what lies above the new Nyquist frequency when downsampling). At 16 kHz it returns
 * `samples` itself. Rates outside 8–192 kHz throw `E_INPUT_INVALID`.
 *
 * @example
 * const { samples, sampleRate } = parseWav(body)
 * const frames = cutFrames(toRate16k(samples, sampleRate))
 */
export function toRate16k(samples: Float32Array, fromRate: number): Float32Array {
  const r = resampler(samples, fromRate)
  if (r === undefined) return samples
  r.fill(0, r.out.length)
  return r.out
}

/**
 * toRate16k in steps of one second of output, giving the event loop a turn between them: on a
 * server, resampling minutes of 192 kHz audio at once would hold every other request for seconds.
 */
export async function toRate16kInSteps(samples: Float32Array, fromRate: number): Promise<Float32Array> {
  const r = resampler(samples, fromRate)
  if (r === undefined) return samples
  for (let j = 0; j < r.out.length; j += VAD_RATE) {
    r.fill(j, Math.min(r.out.length, j + VAD_RATE))
    await new Promise((resolve) => setImmediate(resolve))
  }
  return r.out
}

/** The output buffer and a function that fills output samples [from, to); undefined at 16 kHz already. */
function resampler(
  samples: Float32Array,
  fromRate: number,
): { out: Float32Array; fill(from: number, to: number): void } | undefined {
  if (!(fromRate >= MIN_RATE && fromRate <= MAX_RATE))
    throw invalid(
      `audio at ${fromRate} Hz is outside the supported ${MIN_RATE}–${MAX_RATE} Hz; resample it first, e.g. ` +
        '`sox in.wav -r 16000 out.wav`',
    )
  if (fromRate === VAD_RATE) return undefined
  const step = fromRate / VAD_RATE // input samples per output sample
  // Cut-off in cycles per input sample: the lower of the two Nyquist frequencies.
  const cutoff = 0.5 * Math.min(1, VAD_RATE / fromRate) * ROLLOFF
  const scale = 2 * cutoff // kernel units (zero crossings) per input sample, and its DC gain
  const reach = ZEROS / scale // kernel half-width in input samples
  const out = new Float32Array(Math.round(samples.length / step))
  const fill = (from: number, to: number): void => {
    for (let j = from; j < to; j++) {
      const t = j * step
      const first = Math.max(0, Math.ceil(t - reach))
      const last = Math.min(samples.length - 1, Math.floor(t + reach))
      let acc = 0
      for (let k = first; k <= last; k++) {
        const pos = Math.abs(t - k) * scale * RES
        const i = Math.floor(pos)
        if (i >= ZEROS * RES) continue
        const frac = pos - i
        acc += samples[k]! * (KERNEL[i]! + (KERNEL[i + 1]! - KERNEL[i]!) * frac)
      }
      out[j] = acc * scale
    }
  }
  return { out, fill }
}
