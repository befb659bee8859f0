import type { Image } from 'modelbundle'

// sharp loads on first use, not at start-up (it costs ~0.2 s here; the server is ready sooner).
const loadSharp = () => import('sharp').then((m) => m.default)

export const HEIGHT = 48
export const WIDTH = 192

/**
 * PaddleOCR's direction-classifier input for one text-line image: resized to height 48
 * keeping its aspect (at most 192 wide), right-padded with zeros to 192, channels in BGR order
 * (PaddleOCR reads images with OpenCV), normalised to (x / 255 − 0.5) / 0.5.
 * Returns 3 × 48 × 192 float32 values (CHW).
 */
export async function toClsInput(img: Image): Promise<Float32Array> {
  const width = Math.max(1, Math.min(WIDTH, Math.round((img.width * HEIGHT) / img.height)))
  const sharp = await loadSharp()
  const resized = await sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .resize({ width, height: HEIGHT, fit: 'fill' })
    .raw()
    .toBuffer()
  const out = new Float32Array(3 * HEIGHT * WIDTH)
  const plane = HEIGHT * WIDTH
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 3
      out[y * WIDTH + x] = (resized[p + 2]! / 255 - 0.5) / 0.5 // B
      out[plane + y * WIDTH + x] = (resized[p + 1]! / 255 - 0.5) / 0.5 // G
      out[2 * plane + y * WIDTH + x] = (resized[p]! / 255 - 0.5) / 0.5 // R
    }
  }
  return out
}

/** The classifier's two classes are 0° and 180°; the score is the winning probability. */
export function toDirection(probs: ArrayLike<number>, row = 0): { angle: 0 | 180; score: number } {
  const p0 = probs[row * 2]!
  const p180 = probs[row * 2 + 1]!
  return p0 >= p180 ? { angle: 0, score: p0 } : { angle: 180, score: p180 }
}
