// npm run bench:streaming — time to the first event of a streamed answer against the whole
// answer: the OCR example's POST /readStream (one event per line, as soon as it is read) and
// POST /read (the page once every line is), on the rendered page (4 lines) and the same page
// stacked into nine lines and into twelve, one request at a time and 4 at once. Target: on the
// nine-line page, the first line before half of the whole stream's time.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import sharp from 'sharp'
import { fmt, machine, median, writeSection } from './results.js'
import { startServer, waitReady } from './server.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const SERVICE = fileURLToPath(new URL('../examples/ocr/service.ts', import.meta.url))
const PAGE = readFileSync(new URL('../examples/ocr/images/page.png', import.meta.url))
const home = mkdtempSync(join(tmpdir(), 'mb-bench-stream-'))
const port = 23310
const base = `http://127.0.0.1:${port}`

async function longPage(): Promise<Buffer> {
  const meta = await sharp(PAGE).metadata()
  return sharp({ create: { width: meta.width!, height: meta.height! * 3, channels: 3, background: '#fff' } })
    .composite([0, 1, 2].map((i) => ({ input: PAGE, top: i * meta.height!, left: 0 })))
    .png()
    .toBuffer()
}

/**
 * Nine lines: the page twice, then its first line once more (the band above the second line's
 * tops), so the page's own lines and spacing, no font needed.
 */
async function ninePage(): Promise<Buffer> {
  const meta = await sharp(PAGE).metadata()
  const band = await sharp(PAGE).extract({ left: 0, top: 0, width: meta.width!, height: 96 }).toBuffer()
  return sharp({ create: { width: meta.width!, height: meta.height! * 2 + 96, channels: 3, background: '#fff' } })
    .composite([
      { input: PAGE, top: 0, left: 0 },
      { input: PAGE, top: meta.height!, left: 0 },
      { input: band, top: meta.height! * 2, left: 0 },
    ])
    .png()
    .toBuffer()
}

/** One streamed page: ms to the first line's event, ms to the end event, lines. */
async function streamed(body: Buffer): Promise<{ first: number; total: number; lines: number }> {
  const t0 = performance.now()
  const res = await fetch(`${base}/readStream`, {
    method: 'POST',
    headers: { 'content-type': 'image/png', accept: 'text/event-stream' },
    body,
  })
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
  let first = 0
  let text = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    text += value
    if (first === 0 && text.includes('id: 0\n')) first = performance.now() - t0
  }
  if (!text.endsWith('event: end\ndata: {}\n\n')) throw new Error(`stream did not end: ${text.slice(-200)}`)
  return { first, total: performance.now() - t0, lines: text.match(/^id: /gm)?.length ?? 0 }
}

async function whole(body: Buffer): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(`${base}/read`, { method: 'POST', headers: { 'content-type': 'image/png' }, body })
  if (res.status !== 200) throw new Error(`/read answered ${res.status}`)
  await res.arrayBuffer()
  return performance.now() - t0
}

const { child } = await startServer(
  [BIN, 'serve', SERVICE, '--port', String(port)],
  { BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' },
  'ignore',
)
const exited = new Promise((r) => child.on('exit', r))
try {
  await waitReady(base)
  const rows: string[] = []
  for (const [name, body] of [
    ['page (4 lines)', PAGE],
    ['nine-line page', await ninePage()],
    ['long page (12 lines)', await longPage()],
  ] as const) {
    for (let i = 0; i < 3; i++) await streamed(body) // warm-up
    for (const concurrency of [1, 4]) {
      const firsts: number[] = []
      const totals: number[] = []
      const wholes: number[] = []
      let lines = 0
      for (let round = 0; round < 8; round++) {
        const s = await Promise.all(Array.from({ length: concurrency }, () => streamed(body)))
        for (const r of s) {
          firsts.push(r.first)
          totals.push(r.total)
          lines = r.lines
        }
        wholes.push(...(await Promise.all(Array.from({ length: concurrency }, () => whole(body)))))
      }
      const f = median(firsts)
      const t = median(totals)
      // The target is for one page at a time: four at once share the two cores' queue.
      const target =
        name === 'nine-line page' && concurrency === 1 ? (f / t < 0.5 ? '< 0.5: met' : '< 0.5: **missed**') : ''
      const cells = [name, concurrency, lines, fmt(f, 0), fmt(t, 0), fmt(median(wholes), 0), fmt(f / t, 2), target]
      rows.push(`| ${cells.join(' | ')} |`)
      console.log(name, `c=${concurrency}`, { first: f, total: t, whole: median(wholes) })
    }
  }
  writeSection(
    'streaming',
    `## Streamed answers (\`npm run bench:streaming\`)\n\n${machine()}. The OCR example: \`POST /readStream\` ` +
      `(io.stream, Server-Sent Events, one event per line as soon as it is read) against \`POST /read\` (the ` +
      `page once every line is read), 8 rounds of c requests at a time after 3 warm-up requests; medians.\n\n` +
      '| page | c | lines | first line ms | whole stream ms | /read ms | first ÷ whole | target |\n' +
      `|---|---|---|---|---|---|---|---|\n` +
      `${rows.join('\n')}\n\nThe first line waits for detection and its own direction and recognition only ` +
      `(it goes ahead of the rest of the page, alone); the rest of the page follows line by line. ` +
      `Streaming costs the page little: the whole ` +
      `stream and /read take about as long (each line is its own rec request, which the batcher still batches).`,
  )
} finally {
  child.kill('SIGTERM')
  await exited
  rmSync(home, { recursive: true, force: true })
}
