import { REC_HEIGHT, type RgbImage } from './recognize.js'

// PaddleOCR's text-direction classifier (0° / 180°) for line crops, from the same 48-pixel-high
// crop the recogniser takes, so a page's lines are resized once.

export const CLS_WIDTH = 192

/**
 * The classifier input for one 48-high line: at most 192 wide (wider lines are squeezed, as
 * PaddleOCR does), right-padded with zeros, BGR, (x / 255 − 0.5) / 0.5, CHW.
 */
export function toClsInput(img: RgbImage): Float32Array {
  if (img.height !== REC_HEIGHT) throw new Error(`a cls input is ${REC_HEIGHT} pixels high, got ${img.height}`)
  const w = Math.min(CLS_WIDTH, img.width)
  const plane = REC_HEIGHT * CLS_WIDTH
  const out = new Float32Array(3 * plane)
  const step = img.width / w
  for (let y = 0; y < REC_HEIGHT; y++) {
    for (let x = 0; x < w; x++) {
      // Linear interpolation between the two nearest source columns.
      const sx = Math.min(img.width - 1, Math.max(0, (x + 0.5) * step - 0.5))
      const x0 = Math.floor(sx)
      const x1 = Math.min(img.width - 1, x0 + 1)
      const f = sx - x0
      for (let c = 0; c < 3; c++) {
        const a = img.data[(y * img.width + x0) * 3 + 2 - c]!
        const b = img.data[(y * img.width + x1) * 3 + 2 - c]!
        out[c * plane + y * CLS_WIDTH + x] = ((a + (b - a) * f) / 255 - 0.5) / 0.5
      }
    }
  }
  return out
}

/** Row `row` of the classifier's [N, 2] output: 0° or 180°, and the winning probability. */
export function toDirection(probs: ArrayLike<number>, row = 0): { angle: 0 | 180; score: number } {
  const p0 = probs[row * 2]!
  const p180 = probs[row * 2 + 1]!
  return p0 >= p180 ? { angle: 0, score: p0 } : { angle: 180, score: p180 }
}

/** The image turned half a circle. */
export function rotate180(img: RgbImage): RgbImage {
  const n = img.width * img.height
  const data = new Uint8Array(n * 3)
  for (let i = 0; i < n; i++) {
    const j = (n - 1 - i) * 3
    data[i * 3] = img.data[j]!
    data[i * 3 + 1] = img.data[j + 1]!
    data[i * 3 + 2] = img.data[j + 2]!
  }
  return { data, width: img.width, height: img.height }
}
