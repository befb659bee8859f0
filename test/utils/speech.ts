import { execFile, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'

// Real speech with known timings for VAD tests: espeak-ng speaks, sox trims each clip to its
// audible extent and joins clips and exact digital silences, so the true speech intervals are
// sample counts, not guesses. .ci/run installs both (apt-get install espeak-ng sox) and sets
// BUNDLE_REQUIRE_SPEECH_TESTS=1, so CI cannot skip the tests that use them.

const run = promisify(execFile)

/** The rate clips are built at (the VAD's); other rates are converted from it at the end. */
const RATE = 16000
// Every step writes the same format; no dither, so silences stay exact zeros after conversions.
const FORMAT = ['-D', '-r', String(RATE), '-c', '1', '-b', '16', '-e', 'signed-integer']

/**
 * Why speech tests cannot run here (espeak-ng or sox missing), or undefined when they can —
 * pass it as `skip`. Throws instead when BUNDLE_REQUIRE_SPEECH_TESTS=1.
 *
 * @example
 * describe('speech', { skip: speechTools() }, () => { … })
 */
export function speechTools(): string | undefined {
  // Only whether each runs at all: soxi answers --version with status 1.
  const missing = ['espeak-ng', 'sox', 'soxi'].filter(
    (cmd) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).error !== undefined,
  )
  if (missing.length === 0) return undefined
  const reason = `${missing.join(' and ')} not installed (apt-get install espeak-ng sox)`
  if (process.env.BUNDLE_REQUIRE_SPEECH_TESTS === '1') throw new Error(`BUNDLE_REQUIRE_SPEECH_TESTS=1 but ${reason}`)
  return reason
}

/** A piece of the recording: seconds of digital silence, or a phrase espeak-ng speaks. */
export type SpeechPart = { silence: number } | { say: string; voice?: string }

/** Where speech truly is, in seconds. */
export interface SpeechSegment {
  start: number
  end: number
}

export interface SpeechWav {
  path: string
  bytes: Buffer
  sampleRate: number
  /** The spoken parts, exactly (each clip's own leading and trailing silence trimmed away). */
  segments: SpeechSegment[]
  /** Seconds, as soxi measures the file. */
  duration: number
}

/** Runs sox with these arguments (throws with its stderr when it fails). */
export async function sox(...args: string[]): Promise<void> {
  await run('sox', args)
}

/** Samples in a file, as soxi counts them. */
export async function soxSamples(path: string): Promise<number> {
  return Number((await run('soxi', ['-s', path])).stdout.trim())
}

/** Duration of a file in seconds, as soxi measures it. */
export async function soxDuration(path: string): Promise<number> {
  return Number((await run('soxi', ['-D', path])).stdout.trim())
}

/**
 * A mono 16-bit WAV of the parts in order, at `rate` (16 kHz unless told), and the true
 * intervals of speech in it.
 *
 * @example
 * const wav = await speechWav(tempDir(), [{ silence: 1 }, { say: 'hello world' }, { silence: 1 }])
 * wav.segments // [{ start: 1, end: 1.62 }]
 */
export async function speechWav(
  dir: string,
  parts: readonly SpeechPart[],
  options: { rate?: number; name?: string } = {},
): Promise<SpeechWav> {
  const name = options.name ?? 'speech'
  const pieces: string[] = []
  const segments: SpeechSegment[] = []
  let at = 0 // samples at 16 kHz so far
  for (const [i, part] of parts.entries()) {
    const piece = join(dir, `${name}-${i}.wav`)
    if ('silence' in part) {
      await sox('-n', ...FORMAT, piece, 'trim', '0', String(part.silence))
    } else {
      const raw = join(dir, `${name}-${i}-espeak.wav`)
      await run('espeak-ng', [...(part.voice ? ['-v', part.voice] : []), '-w', raw, part.say])
      // Resampled first, so the cut falls on the final samples; the silence effect cuts up to the
      // first 20 ms above 1% at each end (the tail through a reverse).
      const trim = ['silence', '1', '0.02', '1%']
      await sox(raw, ...FORMAT, piece, 'rate', String(RATE), ...trim, 'reverse', ...trim, 'reverse')
    }
    const n = await soxSamples(piece)
    if ('say' in part) {
      if (n === 0) throw new Error(`espeak-ng said nothing audible for ${JSON.stringify(part.say)}`)
      segments.push({ start: at / RATE, end: (at + n) / RATE })
    }
    at += n
    pieces.push(piece)
  }
  const joined = join(dir, `${name}-16k.wav`)
  if (pieces.length === 1) await sox(pieces[0]!, joined)
  else await sox(...pieces, joined)
  const rate = options.rate ?? RATE
  let path = joined
  if (rate !== RATE) {
    path = join(dir, `${name}-${rate}.wav`)
    await sox('-D', joined, '-r', String(rate), path)
  }
  return { path, bytes: readFileSync(path), sampleRate: rate, segments, duration: await soxDuration(path) }
}

/**
 * The same recording as raw 16 kHz signed 16-bit little-endian PCM (what a streaming client
 * sends), with its WAV beside it.
 *
 * @example
 * const { pcm, segments } = await speechPcm(tempDir(), [{ say: 'hello' }, { silence: 1 }])
 */
export async function speechPcm(
  dir: string,
  parts: readonly SpeechPart[],
  options: { name?: string } = {},
): Promise<SpeechWav & { pcm: Buffer }> {
  const wav = await speechWav(dir, parts, options)
  const raw = join(dir, `${options.name ?? 'speech'}.pcm`)
  await sox(wav.path, '-t', 'raw', '-e', 'signed-integer', '-b', '16', '-L', raw)
  return { ...wav, pcm: readFileSync(raw) }
}
