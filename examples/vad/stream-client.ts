// Streams a WAV file to the VAD service's WebSocket as live audio would arrive — 16 kHz s16le
// PCM in 100 ms messages, in real time (--fast: 1 s messages at 100× real time) — and prints the
// events it sends back.
//   node --import tsx examples/vad/stream-client.ts ws://localhost:3000/stream speech.wav [--fast]
import { readFileSync } from 'node:fs'
import WebSocket from 'ws'
import { parseWav, toRate16k, VAD_RATE } from './wav.js'

const [url, file] = process.argv.slice(2)
if (!url || !file) {
  console.error('usage: stream-client.ts ws://host:port/stream file.wav [--fast]')
  process.exit(2)
}
const fast = process.argv.includes('--fast')
const wav = parseWav(readFileSync(file))
const samples = toRate16k(wav.samples, wav.sampleRate)
const pcm = Buffer.alloc(samples.length * 2)
for (const [i, x] of samples.entries()) pcm.writeInt16LE(Math.round(Math.max(-1, Math.min(1, x)) * 32767), i * 2)

const ws = new WebSocket(url, {
  headers: process.env.BUNDLE_API_KEY ? { authorization: `Bearer ${process.env.BUNDLE_API_KEY}` } : {},
})
ws.on('message', (data) => console.log(String(data)))
ws.on('close', (code) => process.exit(code === 1000 ? 0 : 1))
ws.on('open', async () => {
  // Live: 100 ms of audio every 100 ms. --fast: 1 s of audio every 10 ms (100× real time), under
  // the server's limit of 200 messages a second.
  const chunk = (fast ? VAD_RATE : VAD_RATE / 10) * 2
  for (let at = 0; at < pcm.length; at += chunk) {
    ws.send(pcm.subarray(at, at + chunk))
    await new Promise((r) => setTimeout(r, fast ? 10 : 100))
  }
  ws.send(Buffer.alloc(0)) // the end of the audio: the last events, then the server closes
})
