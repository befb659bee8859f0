import assert from 'node:assert/strict'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import ort from 'onnxruntime-node'
import sharp from 'sharp'
import { ctcDecode, loadDictionary, recWidth, REC_HEIGHT, toRecInput } from '../../examples/ocr/recognize.js'
import { MODELS } from '../utils/models.js'

const KEYS = join(dirname(MODELS.rec), 'ppocr_keys_v1.txt')

async function line(file: string) {
  const img = sharp(new URL(`../fixtures/images/${file}`, import.meta.url).pathname).removeAlpha()
  const meta = await img.metadata()
  const width = recWidth(meta.width!, meta.height!)
  const { data } = await img
    .resize({ width, height: REC_HEIGHT, fit: 'fill' })
    .raw()
    .toBuffer({ resolveWithObject: true })
  return { data: new Uint8Array(data), width, height: REC_HEIGHT }
}

describe('examples/ocr: recognition (PaddleOCR v4 rec + CTC)', () => {
  it('reads rendered English text lines exactly, one by one and as one padded batch', { timeout: 60_000 }, async () => {
    const dict = loadDictionary(KEYS)
    const session = await ort.InferenceSession.create(MODELS.rec)
    try {
      const cases: [string, string][] = [
        ['hello-0.png', 'Hello World 123'],
        ['quick-0.png', 'The quick brown fox'],
        ['invoice-0.png', 'Invoice No. 2026-120'],
      ]
      const images = await Promise.all(cases.map(([f]) => line(f)))
      for (const [i, [, want]] of cases.entries()) {
        const img = images[i]!
        const out = Object.values(
          await session.run({ x: new ort.Tensor('float32', toRecInput(img), [1, 3, REC_HEIGHT, img.width]) }),
        )[0]!
        const [, steps, classes] = out.dims as number[]
        const { text, score } = ctcDecode(out.data as Float32Array, steps!, classes!, dict)
        assert.equal(text, want)
        assert.ok(score > 0.9, `score ${score}`)
      }
      // Lines of one page share a batch, right-padded to the widest.
      const W = Math.max(...images.map((m) => m.width))
      const batch = new Float32Array(images.length * 3 * REC_HEIGHT * W)
      for (const [i, m] of images.entries()) batch.set(toRecInput(m, W), i * 3 * REC_HEIGHT * W)
      const out = Object.values(
        await session.run({ x: new ort.Tensor('float32', batch, [images.length, 3, REC_HEIGHT, W]) }),
      )[0]!
      const [n, steps, classes] = out.dims as number[]
      const probs = out.data as Float32Array
      const texts = Array.from(
        { length: n! },
        (_, i) =>
          ctcDecode(probs.subarray(i * steps! * classes!, (i + 1) * steps! * classes!), steps!, classes!, dict).text,
      )
      assert.deepEqual(
        texts,
        cases.map(([, t]) => t),
      )
    } finally {
      await session.release()
    }
  })

  it('refuses inputs of the wrong height and a dictionary that does not match the model', () => {
    assert.throws(() => toRecInput({ data: new Uint8Array(3 * 10 * 10), width: 10, height: 10 }), /48 pixels high/)
    assert.throws(() => ctcDecode(new Float32Array(4), 1, 4, ['', 'a']), /4 classes, the dictionary 2/)
  })
})
