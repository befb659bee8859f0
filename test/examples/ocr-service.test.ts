import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import sharp from 'sharp'
import { FORM_LINES, PAGE_LINES } from '../../examples/ocr/images/render.js'
import { BIN, bundle } from '../utils/cli.js'
import { listeningUrl } from '../utils/port.js'
import { tempDir } from '../utils/tmp.js'

// The OCR example as a user runs it: `bundle serve examples/ocr/service.ts` on an empty store,
// real PaddleOCR models in three worker processes, pages over HTTP.

const PAGE = readFileSync(new URL('../../examples/ocr/images/page.png', import.meta.url))
const FORM = readFileSync(new URL('../../examples/ocr/images/form.png', import.meta.url))

interface Line {
  text: string
  score: number
  box: [number, number][]
}

describe('examples/ocr: POST /read', () => {
  const home = join(tempDir(), 'home')
  let url = ''
  let child: ReturnType<typeof spawn>
  let exited: Promise<unknown>
  let stderr = ''
  const read = async (body: Uint8Array | FormData, type?: string): Promise<{ status: number; json: any }> => {
    const r = await fetch(`${url}/read`, {
      method: 'POST',
      ...(type ? { headers: { 'content-type': type } } : {}),
      body,
    })
    return { status: r.status, json: await r.json() }
  }

  before(async () => {
    child = spawn(process.execPath, [BIN, 'serve', 'examples/ocr/service.ts', '--port', '0'], {
      env: { ...process.env, BUNDLE_HOME: home, BUNDLE_ACCESS_LOG: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child.stderr!.on('data', (c) => (stderr += c))
    exited = new Promise((r) => child.on('exit', r))
    url = await listeningUrl(child)
    let ready = false
    for (let i = 0; i < 600 && !ready && child.exitCode === null; i++) {
      ready = (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200
      if (!ready) await new Promise((r) => setTimeout(r, 100))
    }
    assert.ok(ready, `the service did not turn ready: ${stderr}`)
  })
  after(async () => {
    child.kill('SIGTERM')
    await exited
  })

  it('brings its three models into an empty store', async () => {
    const list = await bundle(['models', 'list', '-o', 'json'], { BUNDLE_HOME: home })
    assert.deepEqual((JSON.parse(list.stdout) as { tag: string }[]).map((m) => m.tag).sort(), [
      'ocr-cls:2.0.0',
      'ocr-det:4.0.0',
      'ocr-rec:4.0.0',
    ])
    const runners = (await (await fetch(`${url}/runners`)).json()) as { name: string; ready: boolean }[]
    assert.deepEqual(
      runners.map((r) => `${r.name} ${r.ready}`),
      ['ocr-det true', 'ocr-cls true', 'ocr-rec true'],
    )
  })

  it('reads a rendered page exactly, in reading order, with boxes around each line', { timeout: 60_000 }, async () => {
    const r = await read(PAGE, 'image/png')
    assert.equal(r.status, 200, JSON.stringify(r.json))
    const lines = r.json.lines as Line[]
    assert.deepEqual(
      lines.map((l) => l.text),
      PAGE_LINES,
    )
    const meta = await sharp(PAGE).metadata()
    let lastBottom = 0
    for (const l of lines) {
      assert.ok(l.score > 0.9, `${l.text}: ${l.score}`)
      const [[x1, y1], [x2, y2], [x3, y3], [x4, y4]] = l.box as [
        [number, number],
        [number, number],
        [number, number],
        [number, number],
      ]
      assert.ok(
        x1 >= 0 && y1 >= 0 && x3 <= meta.width! && y3 <= meta.height!,
        `box inside the page: ${JSON.stringify(l.box)}`,
      )
      assert.ok(
        x2 === x3 && y1 === y2 && x1 === x4 && y3 === y4 && x3 > x1 && y3 > y1,
        'clockwise corners from the top left',
      )
      assert.ok(y1 >= lastBottom - 4, 'lines do not overlap vertically')
      lastBottom = y3
    }
  })

  it('turns upside-down lines with the direction classifier; JPEG in multipart works too', {
    timeout: 60_000,
  }, async () => {
    const upside = await read(await sharp(PAGE).rotate(180).png().toBuffer(), 'image/png')
    assert.equal(upside.status, 200)
    // The page itself is upside down, so its last line is now on top.
    assert.deepEqual(
      (upside.json.lines as Line[]).map((l) => l.text),
      [...PAGE_LINES].reverse(),
    )
    const form = new FormData()
    form.append(
      'file',
      new Blob([await sharp(PAGE).jpeg({ quality: 85 }).toBuffer()], { type: 'image/jpeg' }),
      'page.jpg',
    )
    const jpeg = await read(form)
    assert.equal(jpeg.status, 200)
    assert.deepEqual(
      (jpeg.json.lines as Line[]).map((l) => l.text),
      PAGE_LINES,
    )
  })

  it('reads fields on one row left to right; an empty page has no lines', { timeout: 60_000 }, async () => {
    const form = await read(FORM, 'image/png')
    assert.deepEqual(
      (form.json.lines as Line[]).map((l) => l.text),
      FORM_LINES,
    )
    const blank = await read(
      await sharp({ create: { width: 300, height: 200, channels: 3, background: '#fff' } })
        .png()
        .toBuffer(),
      'image/png',
    )
    assert.deepEqual(blank.json, { lines: [] })
  })

  it('concurrent pages are all right, and lines go to rec in batches', { timeout: 90_000 }, async () => {
    const before = (await (await fetch(`${url}/v2/models/ocr-rec/stats`)).json()) as any
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => read(i % 2 ? FORM : PAGE, 'image/png')))
    results.forEach((r, i) => {
      assert.equal(r.status, 200, JSON.stringify(r.json))
      assert.deepEqual(
        (r.json.lines as Line[]).map((l) => l.text),
        i % 2 ? FORM_LINES : PAGE_LINES,
      )
    })
    const after = (await (await fetch(`${url}/v2/models/ocr-rec/stats`)).json()) as any
    const rows = after.model_stats[0].inference_count - before.model_stats[0].inference_count
    assert.equal(rows, 3 * PAGE_LINES.length + 3 * FORM_LINES.length)
    const batches = after.model_stats[0].execution_count - before.model_stats[0].execution_count
    assert.ok(batches < rows, `${rows} lines of 6 pages took ${batches} rec batches`)
    assert.ok(
      after.model_stats[0].batch_stats.some((b: { batch_size: number }) => b.batch_size > 1),
      'lines share batches',
    )
  })

  it('POST /readStream sends the same lines one event each, the first before the page is done', {
    timeout: 60_000,
  }, async () => {
    const res = await fetch(`${url}/readStream`, {
      method: 'POST',
      headers: { 'content-type': 'image/png', accept: 'text/event-stream' },
      body: PAGE,
    })
    assert.equal(res.status, 200)
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
    const chunks: string[] = []
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      chunks.push(value)
    }
    const text = chunks.join('')
    const lines = [...text.matchAll(/^id: \d+\ndata: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]!) as Line)
    assert.deepEqual(
      lines.map((l) => l.text),
      PAGE_LINES,
    )
    assert.match(text, /event: end\ndata: \{\}\n\n$/)
    // The first line came in a chunk of its own, before the last line was read.
    assert.ok(chunks.length >= 2, `${chunks.length} chunk(s)`)
    assert.doesNotMatch(chunks[0]!, new RegExp(PAGE_LINES.at(-1)!))
    // Same boxes as /read.
    const whole = await read(PAGE, 'image/png')
    assert.deepEqual(
      lines.map((l) => l.box),
      (whole.json.lines as Line[]).map((l) => l.box),
    )
  })

  it('POST /readStream reads a tall page in two bands: the lines of /read, in order, their boxes within a few pixels', {
    timeout: 60_000,
  }, async () => {
    // The page twice, one under the other: 608 rows, so detBands splits it.
    const meta = await sharp(PAGE).metadata()
    const tall = await sharp({
      create: { width: meta.width!, height: meta.height! * 2, channels: 3, background: '#fff' },
    })
      .composite([
        { input: PAGE, top: 0, left: 0 },
        { input: PAGE, top: meta.height!, left: 0 },
      ])
      .png()
      .toBuffer()
    const res = await fetch(`${url}/readStream`, {
      method: 'POST',
      headers: { 'content-type': 'image/png', accept: 'text/event-stream' },
      body: tall,
    })
    assert.equal(res.status, 200)
    const text = await res.text()
    const lines = [...text.matchAll(/^id: \d+\ndata: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]!) as Line)
    const whole = (await read(tall, 'image/png')).json.lines as Line[]
    assert.deepEqual(
      lines.map((l) => l.text),
      [...PAGE_LINES, ...PAGE_LINES],
    )
    assert.deepEqual(
      whole.map((l) => l.text),
      [...PAGE_LINES, ...PAGE_LINES],
    )
    for (const [i, l] of lines.entries()) {
      const off = l.box.flatMap((p, k) => p.map((v, j) => Math.abs(v - whole[i]!.box[k]![j]!)))
      // The det model pools over its whole input (squeeze-excitation), so a band's map is not the
      // page's: a box may move by a few pixels, never by a sixth of its line's height.
      const height = whole[i]!.box[2]![1]! - whole[i]!.box[0]![1]!
      assert.ok(
        Math.max(...off) <= height / 6,
        `line ${i}: ${JSON.stringify(l.box)} against /read's ${JSON.stringify(whole[i]!.box)}`,
      )
    }
  })

  it('refuses what is not an image with a clear 4xx', async () => {
    const r = await read(new TextEncoder().encode('not an image'), 'image/png')
    assert.equal(r.status, 400)
    assert.equal(r.json.error.code, 'E_INPUT_INVALID')
    const t = await read(new TextEncoder().encode('{}'), 'application/json')
    assert.equal(t.status, 415)
  })
})
