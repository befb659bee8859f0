import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import sharp from 'sharp'
import { z } from 'zod'
import {
  api,
  createClient,
  definitionOf,
  type FileValue,
  type Image,
  io,
  serve,
  service,
  type RunningServer,
  type Tensor,
} from '../../framework/index.js'

// Issue 31: the typed client for every IO kind, through a real server and without a cast — so
// this file type-checking (npm run typecheck) is half the test. client-types.test.ts checks the
// same forms from a user's project.

const Size = z.object({ width: z.number(), height: z.number(), red: z.number() })
const Info = z.object({ mediaType: z.string(), length: z.number() })
const Options = z.object({ scale: z.number() })

@service({ name: 'every-io' })
class EveryIo {
  @api({ input: io.image(), output: io.json(Size) })
  async size(img: Image) {
    return { width: img.width, height: img.height, red: img.data[0]! }
  }

  @api({ input: io.image(), output: io.image() })
  async invert(img: Image): Promise<Image> {
    return { ...img, data: img.data.map((v) => 255 - v) }
  }

  @api({ input: io.file({ mediaTypes: ['application/pdf'] }), output: io.json(Info) })
  async pdf(f: FileValue) {
    return { mediaType: f.mediaType, length: f.bytes.length }
  }

  /** Audio is a file with audio media types (examples/vad). */
  @api({ input: io.file({ mediaTypes: ['audio/wav', 'audio/x-wav'] }), output: io.file() })
  async audio(f: FileValue): Promise<FileValue> {
    return { bytes: f.bytes.slice(0, 4), mediaType: f.mediaType, filename: 'clip é.wav' }
  }

  @api({ input: io.bytes(), output: io.bytes() })
  async reverse(b: Uint8Array) {
    return b.slice().reverse()
  }

  @api({ input: io.tensor({ dtype: 'float32', shape: [-1, 3] }), output: io.tensor({ dtype: 'float32' }) })
  async double(t: Tensor<'float32'>): Promise<Tensor<'float32'>> {
    return { ...t, data: t.data.map((v) => v * 2) }
  }

  @api({ input: io.tensor({ dtype: 'int64' }), output: io.tensor({ dtype: 'int64' }) })
  async next(t: Tensor<'int64'>): Promise<Tensor<'int64'>> {
    return { ...t, data: t.data.map((v) => v + 1n) }
  }

  @api({ input: io.tensor({ dtype: 'string' }), output: io.tensor({ dtype: 'string' }) })
  async upper(t: Tensor<'string'>): Promise<Tensor<'string'>> {
    return { ...t, data: t.data.map((s) => s.toUpperCase()) }
  }

  @api({ input: io.json(z.object({ name: z.string() })), output: io.json(z.object({ greeting: z.string() })) })
  async greet({ name }: { name: string }) {
    return { greeting: `hello ${name}` }
  }

  @api({ input: io.text(), output: io.text() })
  async shout(s: string) {
    return s.toUpperCase()
  }

  @api({
    input: io.multipart({
      image: io.image(),
      options: io.json(Options),
      weights: io.tensor({ dtype: 'float32' }),
      note: io.text(),
    }),
    output: io.multipart({ size: io.json(Size), thumb: io.image(), sum: io.tensor({ dtype: 'float32' }) }),
  })
  async form(input: { image: Image; options: z.infer<typeof Options>; weights: Tensor<'float32'>; note: string }) {
    const sum = input.weights.data.reduce((a, b) => a + b, 0) * input.options.scale
    return {
      size: { width: input.image.width, height: input.image.height, red: input.note.length },
      thumb: input.image,
      sum: { dtype: 'float32' as const, shape: [1], data: new Float32Array([sum]) },
    }
  }
}

/** A w × h PNG, every pixel this RGB colour. */
const png = (w: number, h: number, rgb: [number, number, number]) =>
  sharp(Buffer.alloc(w * h * 3, Buffer.from(rgb)), { raw: { width: w, height: h, channels: 3 } })
    .png()
    .toBuffer()

describe('typed client: every IO kind through a real server, no casts', () => {
  let server: RunningServer
  let client: ReturnType<typeof createClient<typeof EveryIo>>
  let image: Buffer
  before(async () => {
    server = await serve(definitionOf(EveryIo)!, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }) })
    client = createClient<typeof EveryIo>(server.url)
    image = await png(5, 3, [200, 10, 20])
  })
  after(() => server.close())

  it('image inputs as { bytes, mediaType }, bare bytes (a Buffer) or a Blob; an image answer is PNG', async () => {
    const want = { width: 5, height: 3, red: 200 }
    assert.deepEqual(await client.size({ bytes: image, mediaType: 'image/png' }), want)
    assert.deepEqual(await client.size(image), want)
    assert.deepEqual(await client.size(new Blob([image], { type: 'image/png' })), want)
    const inverted = await client.invert({ bytes: image, mediaType: 'image/png' })
    assert.equal(inverted.mediaType, 'image/png')
    const { data } = await sharp(inverted.bytes).raw().toBuffer({ resolveWithObject: true })
    assert.deepEqual([...data.subarray(0, 3)], [55, 245, 235])
  })

  it('files and audio as { bytes, mediaType } or a File; a file answer with its filename', async () => {
    const pdf = new TextEncoder().encode('%PDF-1.7 …')
    assert.deepEqual(await client.pdf({ bytes: pdf, mediaType: 'application/pdf' }), {
      mediaType: 'application/pdf',
      length: pdf.length,
    })
    const wav = new Uint8Array([0x52, 0x49, 0x46, 0x46, 1, 2, 3])
    for (const input of [{ bytes: wav, mediaType: 'audio/wav' }, new File([wav], 'a.wav', { type: 'audio/wav' })]) {
      const out = await client.audio(input)
      assert.deepEqual([...out.bytes], [0x52, 0x49, 0x46, 0x46])
      assert.equal(out.mediaType, 'audio/wav')
      assert.equal(out.filename, 'clip é.wav')
    }
    // The declared media type is the default for bare bytes.
    assert.equal((await client.audio(wav)).mediaType, 'audio/wav')
  })

  it('bytes in and out', async () => {
    const out = await client.reverse(new Uint8Array([1, 2, 3]))
    assert.deepEqual([...out.bytes], [3, 2, 1])
    assert.equal(out.mediaType, 'application/octet-stream')
  })

  it('tensors as typed arrays (raw) or JSON values; answers with typed-array data, 64-bit integers exact', async () => {
    const out = await client.double({ dtype: 'float32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, -0.5]) })
    assert.ok(out.data instanceof Float32Array)
    assert.deepEqual(out.shape, [2, 3])
    assert.deepEqual([...out.data], [2, 4, 6, 8, 10, -1])
    const nested = await client.double({ shape: [1, 3], data: [[0.5, 1, 1.5]] })
    assert.deepEqual([...nested.data], [1, 2, 3])
    const big = 2n ** 62n + 1n
    const next = await client.next({ dtype: 'int64', shape: [2], data: new BigInt64Array([big, -5n]) })
    assert.ok(next.data instanceof BigInt64Array)
    assert.deepEqual([...next.data], [big + 1n, -4n])
    const upper = await client.upper({ shape: [2], data: ['ab', 'é'] })
    assert.deepEqual(upper, { dtype: 'string', shape: [2], data: ['AB', 'É'] })
  })

  it('JSON and text as they are', async () => {
    assert.deepEqual(await client.greet({ name: 'ada' }), { greeting: 'hello ada' })
    assert.equal(await client.shout('quiet'), 'QUIET')
  })

  it('a multipart input as an object of parts; a multipart answer as an object of decoded parts', async () => {
    const out = await client.form({
      image: { bytes: image, mediaType: 'image/png' },
      options: { scale: 2 },
      weights: { dtype: 'float32', shape: [3], data: new Float32Array([1, 2, 3.5]) },
      note: 'four',
    })
    assert.deepEqual(out.size, { width: 5, height: 3, red: 4 })
    assert.equal(out.thumb.mediaType, 'image/png')
    assert.deepEqual((await sharp(out.thumb.bytes).metadata()).width, 5)
    assert.ok(out.sum.data instanceof Float32Array)
    assert.deepEqual([...out.sum.data], [13])
    // Bare bytes take the part's declared media type; JSON tensor values work in a part too.
    const again = await client.form({ image, options: { scale: 1 }, weights: { shape: [1], data: [7] }, note: '' })
    assert.deepEqual([...again.sum.data], [7])
  })
})
