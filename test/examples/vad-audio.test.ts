import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import { cutFrames, FRAME_SAMPLES, PcmFramer } from '../../examples/vad/frames.js'
import { segmentSpeech, SpeechSegmenter, type SpeechEvent } from '../../examples/vad/segmenter.js'
import { parseWav, toRate16k, toRate16kInSteps } from '../../examples/vad/wav.js'
import { sox, soxSamples, speechPcm, speechTools, speechWav } from '../utils/speech.js'
import { tempDir } from '../utils/tmp.js'

// The VAD example's audio side, without the model: WAV bodies as sox writes them, resampling to
// 16 kHz, 96 ms frames from streamed PCM, and speech segments from per-frame probabilities —
// end to end on espeak-ng speech whose true timings are known, with frame energy standing in
// for the model.

const skip = speechTools()
const F = FRAME_SAMPLES / 16000 // seconds per frame
const invalid = (message: RegExp) => ({ name: 'BundleError', code: 'E_INPUT_INVALID', message })

// --- hand-built WAV bodies -------------------------------------------------------------------
const u32 = (n: number) => new Uint8Array(new Uint32Array([n]).buffer)
const ascii = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'))
const cat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts))
const chunk = (id: string, body: Uint8Array) => cat(ascii(id), u32(body.length), body, new Uint8Array(body.length & 1))
const riff = (...chunks: Uint8Array[]) => {
  const body = cat(ascii('WAVE'), ...chunks)
  return cat(ascii('RIFF'), u32(body.length), body)
}
function fmt(code: number, channels: number, rate: number, bits: number, sub?: { code: number; tail?: number[] }) {
  const v = new DataView(new ArrayBuffer(sub ? 40 : 16))
  const align = channels * Math.ceil(bits / 8)
  v.setUint16(0, sub ? 0xfffe : code, true)
  v.setUint16(2, channels, true)
  v.setUint32(4, rate, true)
  v.setUint32(8, rate * align, true)
  v.setUint16(12, align, true)
  v.setUint16(14, bits, true)
  if (sub) {
    v.setUint16(16, 22, true)
    v.setUint16(18, bits, true)
    v.setUint16(24, sub.code, true)
    const tail = sub.tail ?? [0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71]
    for (const [i, b] of tail.entries()) v.setUint8(26 + i, b)
  }
  return chunk('fmt ', new Uint8Array(v.buffer))
}
const i16 = (...xs: number[]) => new Uint8Array(new Int16Array(xs).buffer)
const f32 = (...xs: number[]) => new Uint8Array(new Float32Array(xs).buffer)
const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol: number, what: string) => {
  assert.equal(a.length, b.length, `${what}: length`)
  let worst = 0
  for (let i = 1; i < a.length; i++) if (Math.abs(a[i]! - b[i]!) > Math.abs(a[worst]! - b[worst]!)) worst = i
  const d = a.length === 0 ? 0 : Math.abs(a[worst]! - b[worst]!)
  assert.ok(d <= tol, `${what}: sample ${worst}: ${a[worst]} vs ${b[worst]}`)
}

// --- signal measures -------------------------------------------------------------------------
const rms = (x: Float32Array, from = 0, to = x.length) => {
  let s = 0
  for (let i = from; i < to; i++) s += x[i]! ** 2
  return Math.sqrt(s / (to - from))
}
const crossings = (x: Float32Array, from = 0, to = x.length) => {
  let n = 0
  for (let i = from + 1; i < to; i++) if (x[i - 1]! < 0 !== x[i]! < 0) n++
  return n
}
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
/** Decodes a file with sox itself into mono float: the reference our parser must match. */
async function soxMono(path: string, dir: string): Promise<Float32Array> {
  const raw = join(dir, 'ref.f32')
  const channels = Number((await promisify(execFile)('soxi', ['-c', path])).stdout)
  await sox(path, '-t', 'raw', '-e', 'floating-point', '-b', '32', '-L', raw)
  const all = new Float32Array(new Uint8Array(readFileSync(raw)).buffer)
  const mono = new Float32Array(all.length / channels)
  for (let i = 0; i < mono.length; i++) {
    for (let c = 0; c < channels; c++) mono[i]! += all[i * channels + c]!
    mono[i]! /= channels
  }
  return mono
}

describe('examples/vad: WAV bodies', () => {
  it('decodes exact sample values: 16/24-bit, unsigned 8-bit, float (clamped), channels averaged', () => {
    const s16 = parseWav(riff(fmt(1, 1, 16000, 16), chunk('data', i16(0, 16384, -32768, 32767))))
    assert.deepEqual(
      { ...s16, samples: [...s16.samples] },
      {
        sampleRate: 16000,
        channels: 1,
        samples: [0, 0.5, -1, 32767 / 32768],
      },
    )
    const s24 = parseWav(
      riff(fmt(1, 1, 8000, 24), chunk('data', new Uint8Array([0, 0, 0x80, 0xff, 0xff, 0x7f, 0, 0, 0xc0]))),
    )
    assert.deepEqual([...s24.samples], [-1, 8388607 / 8388608, -0.5])
    assert.deepEqual(
      [...parseWav(riff(fmt(1, 1, 8000, 8), chunk('data', new Uint8Array([0, 128, 192])))).samples],
      [-1, 0, 0.5],
    )
    const fl = parseWav(
      riff(fmt(3, 1, 8000, 32), chunk('data', f32(0.25, 2, -3, Number.NaN, Number.POSITIVE_INFINITY))),
    )
    assert.deepEqual([...fl.samples], [0.25, 1, -1, 0, 0], 'NaN/∞ would poison the model state')
    const stereo = parseWav(riff(fmt(1, 2, 16000, 16), chunk('data', i16(16384, 0, -32768, 32767))))
    assert.equal(stereo.channels, 2)
    close(stereo.samples, [0.25, -0.5 / 32768], 1e-9, 'stereo average')
  })

  it('skips unknown chunks (odd-sized, before and after fmt), reads EXTENSIBLE, drops a partial last frame', () => {
    const data = chunk('data', cat(i16(1000, 2000, 3000), new Uint8Array([7])))
    const w = parseWav(riff(chunk('LIST', ascii('INFOISFT')), chunk('junk', ascii('odd')), fmt(1, 1, 22050, 16), data))
    close(w.samples, [1000 / 32768, 2000 / 32768, 3000 / 32768], 0, 'after LIST and an odd chunk')
    const ext = parseWav(riff(fmt(0, 2, 48000, 32, { code: 3 }), chunk('data', f32(0.5, -0.25, 0.1))))
    assert.deepEqual({ rate: ext.sampleRate, ch: ext.channels, n: ext.samples.length }, { rate: 48000, ch: 2, n: 1 })
    assert.ok(Math.abs(ext.samples[0]! - 0.125) < 1e-7, `extensible float: ${ext.samples[0]}`)
    // A view into a larger buffer (as Buffer pools hand out) is read at its own offset.
    const body = riff(fmt(1, 1, 16000, 16), chunk('data', i16(-16384)))
    const host = new Uint8Array(body.length + 5)
    host.set(body, 3)
    assert.deepEqual([...parseWav(host.subarray(3, 3 + body.length)).samples], [-0.5])
  })

  it('refuses what is not a WAV, or is truncated or unsupported, with a message that says what to do', () => {
    const good = riff(fmt(1, 1, 16000, 16), chunk('data', i16(1, 2, 3, 4)))
    const cases: [Uint8Array, RegExp][] = [
      [new Uint8Array(0), /0 bytes, too short to be a WAV/],
      [ascii('hello, this is text not audio'), /not a WAV file.*sox/],
      [cat(ascii('ID3\x04'), new Uint8Array(20)), /looks like MP3/],
      [cat(new Uint8Array([0xff, 0xfb, 0x90, 0]), new Uint8Array(20)), /looks like MP3/],
      [cat(ascii('OggS'), new Uint8Array(20)), /looks like Ogg/],
      [cat(ascii('fLaC'), new Uint8Array(20)), /looks like FLAC/],
      [cat(ascii('RIFX'), good.subarray(4)), /big-endian/],
      [cat(ascii('RIFF'), u32(4), ascii('AVI ')), /not a WAV file/],
      [riff(chunk('data', i16(1))), /no "fmt " chunk/],
      [riff(fmt(1, 1, 16000, 16)), /no "data" chunk/],
      [riff(chunk('fmt ', new Uint8Array(14))), /"fmt " chunk is 14 bytes/],
      [good.subarray(0, good.length - 3), /truncated: its data chunk declares 8 bytes but only 5/],
      [good.subarray(0, 30), /truncated inside its "fmt " chunk/],
      [riff(fmt(2, 1, 16000, 4), chunk('data', i16(1))), /format code 2.*not supported.*sox/],
      [riff(fmt(1, 1, 16000, 64), chunk('data', i16(1, 2, 3, 4))), /64-bit PCM.*not supported/],
      [riff(fmt(3, 1, 16000, 16), chunk('data', i16(1))), /16-bit float.*not supported/],
      [riff(fmt(0, 1, 16000, 16, { code: 1, tail: new Array(14).fill(1) }), chunk('data', i16(1))), /sub-format/],
      [riff(fmt(1, 0, 16000, 16), chunk('data', i16(1))), /0 channels/],
      [riff(fmt(1, 1, 0, 16), chunk('data', i16(1))), /sample rate of 0/],
    ]
    for (const [body, message] of cases) assert.throws(() => parseWav(body), invalid(message), String(message))
    // 12-bit audio is stored in 2-byte containers, which blockAlign says: it decodes.
    assert.deepEqual([...parseWav(riff(fmt(1, 1, 16000, 12), chunk('data', i16(-16384)))).samples], [-0.5])
  })

  it('decodes what sox writes: 8/16/24/32-bit PCM, float, stereo, 3 channels, 8 to 48 kHz, streamed', {
    skip,
  }, async () => {
    const dir = tempDir()
    const specs = [
      ['-r', '16000', '-c', '1', '-b', '16'],
      ['-r', '44100', '-c', '2', '-b', '24'],
      ['-r', '8000', '-c', '1', '-b', '8'],
      ['-r', '48000', '-c', '2', '-b', '32'],
      ['-r', '22050', '-c', '1', '-e', 'floating-point', '-b', '32'],
      ['-r', '16000', '-c', '3', '-b', '16'],
    ]
    for (const [i, spec] of specs.entries()) {
      const path = join(dir, `t${i}.wav`)
      // A different tone per channel, so averaging is checked, not just copying one channel.
      await sox('-n', ...spec, path, 'synth', '0.5', 'sine', '440', 'sine', '1000', 'sine', '300', 'vol', '0.8')
      const wav = parseWav(readFileSync(path))
      assert.equal(wav.sampleRate, Number(spec[1]), spec.join(' '))
      assert.equal(wav.channels, Number(spec[3]))
      assert.equal(wav.samples.length, await soxSamples(path))
      close(wav.samples, await soxMono(path, dir), 1e-6, spec.join(' '))
    }
    // sox writing to a pipe cannot seek back to fill in the sizes: the data runs to the end.
    const { stdout } = await promisify(execFile)(
      'sox',
      ['-n', '-r', '16000', '-c', '1', '-b', '16', '-t', 'wav', '-', 'synth', '0.3', 'sine', '440'],
      { encoding: 'buffer' },
    )
    assert.equal(stdout.readUInt32LE(40), 0x7ffff000, 'sox left its placeholder size')
    assert.equal(parseWav(stdout).samples.length, 4800)
    const alaw = join(dir, 'alaw.wav')
    await sox('-n', '-r', '8000', '-e', 'a-law', alaw, 'synth', '0.1', 'sine', '440')
    assert.throws(() => parseWav(readFileSync(alaw)), invalid(/format code 6/))
  })
})

describe('examples/vad: resampling to 16 kHz', () => {
  const tone = (rate: number, hz: number, seconds: number, amp = 0.5) =>
    Float32Array.from({ length: Math.round(rate * seconds) }, (_, i) => amp * Math.sin((2 * Math.PI * hz * i) / rate))

  it('passes 16 kHz through untouched and refuses rates outside 8–192 kHz', () => {
    const x = tone(16000, 440, 0.1)
    assert.equal(toRate16k(x, 16000), x)
    for (const rate of [7999, 192001, 0, Number.NaN])
      assert.throws(() => toRate16k(x, rate), invalid(/outside the supported 8000–192000 Hz.*sox/))
    assert.equal(toRate16k(tone(8000, 440, 0.1), 8000).length, 1600)
  })

  it('keeps a 440 Hz tone’s frequency, amplitude and length from 8 to 192 kHz, and DC exactly', () => {
    for (const rate of [8000, 11025, 22050, 44100, 48000, 96000, 192000]) {
      const y = toRate16k(tone(rate, 440, 1), rate)
      assert.equal(y.length, 16000, `${rate}`)
      const edge = 400 // the filter's edges see zeros beyond the signal
      const zc = crossings(y, edge, y.length - edge)
      const expected = (880 * (y.length - 2 * edge)) / 16000
      assert.ok(Math.abs(zc - expected) <= 2, `${rate} Hz: ${zc} zero crossings, expected ~${expected}`)
      const r = rms(y, edge, y.length - edge)
      assert.ok(Math.abs(r / (0.5 / Math.SQRT2) - 1) < 0.01, `${rate} Hz: RMS ${r}`)
      const dc = toRate16k(new Float32Array(rate).fill(0.25), rate)
      assert.ok(Math.abs(dc[8000]! - 0.25) < 1e-4, `${rate} Hz: DC ${dc[8000]}`)
    }
  })

  it('filters out what lies above 8 kHz instead of folding it into speech (a 12 kHz tone at 44.1 kHz)', () => {
    const y = toRate16k(tone(44100, 12000, 1), 44100)
    const r = rms(y, 400, y.length - 400)
    // Plain decimation would fold it to a 4 kHz tone at full strength (RMS 0.35).
    assert.ok(r < 0.005, `12 kHz leaked through: RMS ${r}`)
  })

  it('in steps of a second (a server’s way) gives exactly the same samples', async () => {
    const x = new Float32Array(44100 * 3 + 123).map((_, i) => Math.sin(i / 7) * 0.5)
    assert.deepEqual(await toRate16kInSteps(x, 44100), toRate16k(x, 44100))
    assert.equal(await toRate16kInSteps(x, 16000), x)
  })

  it('matches sox’s own resampler on a real tone', { skip }, async () => {
    const dir = tempDir()
    const src = join(dir, 'a.wav')
    const ref = join(dir, 'b.wav')
    await sox(
      '-n',
      '-r',
      '44100',
      '-c',
      '1',
      '-b',
      '24',
      src,
      'synth',
      '1',
      'sine',
      '440',
      'sine',
      '2500',
      'vol',
      '0.5',
    )
    await sox(src, '-e', 'floating-point', '-b', '32', ref, 'rate', '-v', '16000')
    const wav = parseWav(readFileSync(src))
    const ours = toRate16k(wav.samples, wav.sampleRate)
    const theirs = parseWav(readFileSync(ref)).samples
    assert.equal(ours.length, theirs.length)
    const diff = ours.map((v, i) => v - theirs[i]!)
    const ratio = rms(diff, 400, diff.length - 400) / rms(theirs, 400, theirs.length - 400)
    assert.ok(ratio < 0.01, `differs from sox by ${(ratio * 100).toFixed(2)}% RMS`)
  })
})

describe('examples/vad: frames', () => {
  const pcm = (n: number, seed: number) => {
    const r = random(seed)
    return i16(...Array.from({ length: n }, () => Math.floor(r() * 65536) - 32768))
  }

  it('rebuilds exactly the same 1536-sample frames from chunks of any size, odd ones included', () => {
    const bytes = pcm(FRAME_SAMPLES * 5 + 700, 1)
    const whole = cutFrames(Float32Array.from(new Int16Array(bytes.buffer), (v) => v / 32768))
    assert.equal(whole.frames.length, 6)
    assert.equal(whole.padded, FRAME_SAMPLES - 700)
    for (const seed of [2, 3, 4]) {
      const r = random(seed)
      const framer = new PcmFramer()
      const frames: Float32Array[] = []
      for (let at = 0; at < bytes.length; ) {
        const size = r() < 0.2 ? Math.floor(r() * 3) : Math.floor(r() * 5000) // 0, 1 and 2-byte chunks too
        frames.push(...framer.push(bytes.subarray(at, at + size)))
        at += size
      }
      assert.equal(framer.pending, 700)
      const tail = framer.flush()!
      assert.equal(tail.padded, whole.padded)
      assert.deepEqual([...frames, tail.frame], whole.frames, `seed ${seed}`)
      assert.equal(framer.flush(), undefined)
    }
  })

  it('reads signed little-endian samples split across chunks, and refuses a stream ending mid-sample', () => {
    const framer = new PcmFramer(4)
    assert.deepEqual(framer.push(new Uint8Array([0x00, 0x80, 0xff])), [])
    assert.deepEqual(framer.push(new Uint8Array([0xff, 0xff, 0x7f, 0x00, 0x40, 0x01])), [
      new Float32Array([-1, -1 / 32768, 32767 / 32768, 0.5]),
    ])
    assert.throws(() => framer.flush(), invalid(/odd number of bytes/))
  })

  it('cuts whole audio into copies, padding only a partial last frame', () => {
    const x = new Float32Array(FRAME_SAMPLES * 2).fill(0.5)
    const { frames, padded } = cutFrames(x)
    assert.deepEqual({ n: frames.length, padded }, { n: 2, padded: 0 })
    x[0] = 0
    assert.equal(frames[0]![0], 0.5, 'a frame does not alias the input')
    assert.deepEqual(cutFrames(new Float32Array(0)), { frames: [], padded: 0 })
    const one = cutFrames(new Float32Array(10).fill(1))
    assert.deepEqual(
      { padded: one.padded, last: one.frames[0]![10], sum: one.frames[0]!.reduce((a, b) => a + b) },
      {
        padded: FRAME_SAMPLES - 10,
        last: 0,
        sum: 10,
      },
    )
  })
})

describe('examples/vad: speech segments from per-frame probabilities', () => {
  /** Runs probabilities through, recording at which frame each event came out. */
  const feed = (probs: number[], options = {}) => {
    const seg = new SpeechSegmenter(options)
    const out: (SpeechEvent & { at: number })[] = []
    for (const [at, p] of probs.entries()) out.push(...seg.push(p).map((e) => ({ ...e, at })))
    out.push(...seg.flush().map((e) => ({ ...e, at: probs.length })))
    return { events: out, segments: seg.segments }
  }
  const run = (...spans: [number, number][]) => spans.flatMap(([p, n]) => new Array<number>(n).fill(p))
  const t = (frame: number) => (frame * 1536) / 16000

  it('starts a padded frame early once confirmed, ends where the low run began once redeemed', () => {
    const { events, segments } = feed(run([0, 5], [0.9, 10], [0.1, 10]))
    assert.deepEqual(events, [
      { event: 'speech_start', time: t(4), at: 7 }, // frame 5, less 1 of pad; known after 3 frames
      { event: 'speech_end', time: t(15), at: 22 }, // the 8th low frame (15…22) ends it
    ])
    assert.deepEqual(segments, [{ start: t(4), end: t(15) }])
    assert.equal(t(15), 1.44)
  })

  it('bridges 7 low frames, splits on 8; frames between the thresholds keep speech but never start it', () => {
    assert.equal(feed(run([0.9, 5], [0.2, 7], [0.9, 5], [0, 8])).segments.length, 1)
    assert.deepEqual(feed(run([0.9, 5], [0.2, 8], [0.9, 5], [0, 8])).segments, [
      { start: 0, end: t(5) },
      { start: t(12), end: t(18) },
    ])
    assert.deepEqual(feed(run([0.9, 3], [0.4, 20], [0, 8])).segments, [{ start: 0, end: t(23) }])
    assert.deepEqual(feed(run([0.45, 30])).events, [])
  })

  it('drops segments shorter than minSpeechFrames without any event; options change the rules', () => {
    assert.deepEqual(feed(run([0, 4], [0.9, 2], [0, 20])).events, [])
    assert.equal(feed(run([0, 4], [0.9, 3], [0, 20])).segments.length, 1)
    const o = { minSpeechFrames: 1, redemptionFrames: 2, preSpeechPadFrames: 3 }
    // The pad reaches back at most to where the previous segment ended.
    assert.deepEqual(feed(run([0, 5], [0.6, 1], [0.3, 2], [0.6, 1], [0, 2]), o).segments, [
      { start: t(2), end: t(6) },
      { start: t(6), end: t(9) },
    ])
    assert.deepEqual(feed(run([0.7, 4], [0, 9]), { positiveThreshold: 0.8 }).events, [])
  })

  it('flush() closes an open segment where speech stopped, drops an unconfirmed one, clamps to the duration', () => {
    const open = feed(run([0, 2], [0.9, 6]))
    assert.deepEqual(open.events.at(-1), { event: 'speech_end', time: t(8), at: 8 })
    assert.deepEqual(feed(run([0.9, 6], [0.1, 3])).segments, [{ start: 0, end: t(6) }])
    assert.deepEqual(feed(run([0, 9], [0.9, 2])).events, [])
    const { events, segments } = segmentSpeech(run([0, 3], [0.9, 5]), {}, 0.7)
    assert.deepEqual(segments, [{ start: t(2), end: 0.7 }])
    assert.deepEqual(events[1], { event: 'speech_end', time: 0.7 })
  })

  it('refuses bad options, probabilities outside 0..1, and pushes after flush()', () => {
    assert.throws(() => new SpeechSegmenter({ negativeThreshold: 0.6 }), /negativeThreshold/)
    assert.throws(() => new SpeechSegmenter({ redemptionFrames: 0 }), /redemptionFrames/)
    const seg = new SpeechSegmenter()
    for (const p of [Number.NaN, -0.1, 1.5]) assert.throws(() => seg.push(p), /lies in 0\.\.1/)
    seg.flush()
    assert.throws(() => seg.push(0.5), /after flush/)
  })
})

describe('examples/vad: real speech with known timings (espeak-ng + sox)', { skip }, () => {
  const PARTS = [
    { silence: 1.0 },
    { say: 'the quick brown fox jumps over the lazy dog' },
    { silence: 1.5 },
    { say: 'hello world, this is a test' },
    { silence: 1.0 },
  ]

  it('places each phrase where sox finds it: exact zeros between, sound at both edges', async () => {
    const wav = await speechWav(tempDir(), PARTS)
    assert.equal(wav.segments.length, 2)
    const x = parseWav(wav.bytes).samples
    assert.ok(Math.abs(wav.duration - x.length / 16000) < 1e-4, `soxi says ${wav.duration} s`)
    const at = (s: number) => Math.round(s * 16000)
    const [a, b] = wav.segments as [{ start: number; end: number }, { start: number; end: number }]
    assert.equal(a.start, 1)
    assert.ok(Math.abs(b.start - a.end - 1.5) < 1e-9 && Math.abs(wav.duration - b.end - 1) < 1e-4, 'silences')
    for (const [from, to] of [
      [0, at(a.start)],
      [at(a.end), at(b.start)],
      [at(b.end), x.length],
    ] as const)
      assert.ok(
        x.subarray(from, to).every((v) => v === 0),
        `silence ${from}…${to}`,
      )
    for (const s of wav.segments) {
      const peak = (from: number, to: number) => Math.max(...x.subarray(from, to).map(Math.abs))
      assert.ok(
        peak(at(s.start), at(s.start) + 320) > 0.01 && peak(at(s.end) - 320, at(s.end)) > 0.01,
        'speech at edges',
      )
    }
    // sox's own silence detector, run on the whole file, finds the first phrase where we say it
    // starts — within 5 ms, as it measures a running RMS whose window now also sees the silence.
    const cut = join(tempDir(), 'cut.wav')
    await sox(wav.path, cut, 'silence', '1', '0.02', '1%')
    const found = (x.length - (await soxSamples(cut))) / 16000
    assert.ok(Math.abs(found - a.start) <= 0.005, `sox finds speech from ${found} s, we say ${a.start} s`)
  })

  // Frame energy stands in for the model: exact timings, so segments must match the truth.
  const energyProbs = (frames: Float32Array[]) => frames.map((f) => (rms(f) > 0.005 ? 1 : 0))
  const near = (got: { start: number; end: number }[], truth: { start: number; end: number }[], what: string) => {
    assert.equal(got.length, truth.length, `${what}: ${JSON.stringify(got)} vs ${JSON.stringify(truth)}`)
    got.forEach((g, i) => {
      // The start moves one frame earlier (the pad) and both land on frame boundaries.
      assert.ok(Math.abs(g.start - (truth[i]!.start - F)) <= F + 1e-9, `${what}: start ${g.start}`)
      assert.ok(Math.abs(g.end - truth[i]!.end) <= F + 1e-9, `${what}: end ${g.end}`)
    })
  }

  it('finds the true segments through parse → resample → frames → segmenter, at 8, 16 and 44.1 kHz', async () => {
    const dir = tempDir()
    for (const rate of [16000, 8000, 44100]) {
      const wav = await speechWav(dir, PARTS, { rate, name: `r${rate}` })
      const { samples, sampleRate } = parseWav(wav.bytes)
      const { frames } = cutFrames(toRate16k(samples, sampleRate))
      near(segmentSpeech(energyProbs(frames), {}, wav.duration).segments, wav.segments, `${rate} Hz`)
    }
  })

  it('streams the same recording as raw PCM in random chunks: same frames, same segments', async () => {
    const { pcm, bytes, segments, duration } = await speechPcm(tempDir(), PARTS)
    assert.equal(pcm.length, parseWav(bytes).samples.length * 2)
    const framer = new PcmFramer()
    const seg = new SpeechSegmenter()
    const frames: Float32Array[] = []
    const r = random(7)
    for (let at = 0; at < pcm.length; ) {
      const size = 1 + Math.floor(r() * 9000)
      for (const f of framer.push(pcm.subarray(at, at + size))) frames.push(f), seg.push(energyProbs([f])[0]!)
      at += size
    }
    const tail = framer.flush()
    if (tail) frames.push(tail.frame), seg.push(energyProbs([tail.frame])[0]!)
    seg.flush(duration)
    assert.deepEqual(frames, cutFrames(parseWav(bytes).samples).frames)
    near([...seg.segments], segments, 'streamed')
  })
})
