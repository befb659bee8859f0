import type { Image } from 'modelbundle'

export const HEIGHT = 48
export const WIDTH = 192

/**
 * How the classifier wants its image: resized to height 48 keeping its aspect, at most 192
 * wide (PaddleOCR squeezes wider lines) — done by io.image() while it decodes, in one pass.
 */
export const CLS_RESIZE = { height: HEIGHT, maxWidth: WIDTH } as const

/**
 * PaddleOCR's direction-classifier input for one text-line image already resized by
 * CLS_RESIZE: right-padded with zeros to 192, channels in BGR order (PaddleOCR reads images
 * with OpenCV), normalised to (x / 255 − 0.5) / 0.5. Returns 3 × 48 × 192 float32 values (CHW).
 */
export function toClsInput(img: Image): Float32Array {
  if (img.height !== HEIGHT || img.width > WIDTH)
    throw new Error(
      `toClsInput takes an image resized by CLS_RESIZE (${HEIGHT} high, at most ${WIDTH} wide), got ` +
        `${img.width}×${img.height}`,
    )
  const { width, data } = img
  const out = new Float32Array(3 * HEIGHT * WIDTH)
  const plane = HEIGHT * WIDTH
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 3
      out[y * WIDTH + x] = (data[p + 2]! / 255 - 0.5) / 0.5 // B
      out[plane + y * WIDTH + x] = (data[p + 1]! / 255 - 0.5) / 0.5 // G
      out[2 * plane + y * WIDTH + x] = (data[p]! / 255 - 0.5) / 0.5 // R
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
