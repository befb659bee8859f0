import { readFileSync } from 'node:fs'

// PaddleOCR text recognition (CTC), the pieces around the rec model: the input a text-line crop
// becomes, and greedy CTC decoding of its output. The last stage of service.ts; usable on its
// own for single text lines.

export const REC_HEIGHT = 48

/** Raw interleaved RGB pixels. */
export interface RgbImage {
  data: Uint8Array
  width: number
  height: number
}

/**
 * The rec model's input for one text line already resized to REC_HEIGHT (keeping its aspect;
 * width a multiple of 8, the model's stride): channels in BGR order (PaddleOCR reads images
 * with OpenCV), normalised to (x / 255 − 0.5) / 0.5, CHW. `padTo` right-pads with zeros so lines
 * of one page can share a batch.
 */
export function toRecInput(img: RgbImage, padTo = img.width): Float32Array {
  if (img.height !== REC_HEIGHT) throw new Error(`a rec input is ${REC_HEIGHT} pixels high, got ${img.height}`)
  const W = Math.max(padTo, img.width)
  const plane = REC_HEIGHT * W
  const out = new Float32Array(3 * plane)
  for (let y = 0; y < REC_HEIGHT; y++) {
    for (let x = 0; x < img.width; x++) {
      const at = (y * img.width + x) * 3
      for (let c = 0; c < 3; c++) out[c * plane + y * W + x] = (img.data[at + 2 - c]! / 255 - 0.5) / 0.5
    }
  }
  return out
}

/** The width a line of `width` × `height` pixels gets at REC_HEIGHT, rounded up to a multiple of 8. */
export const recWidth = (width: number, height: number): number =>
  Math.max(8, Math.ceil((width * REC_HEIGHT) / height / 8) * 8)

/** The class list: 0 is the CTC blank, then one class per line of the keys file, then a space. */
export function loadDictionary(keysFile: string): string[] {
  const lines = readFileSync(keysFile, 'utf8').split('\n')
  if (lines.at(-1) === '') lines.pop()
  return ['', ...lines, ' ']
}

/**
 * Greedy CTC decoding of one line's output [T, C] (probabilities): the best class per step,
 * repeats merged, blanks dropped, the ends trimmed; the score is the mean probability of the
 * kept steps.
 */
export function ctcDecode(
  probs: Float32Array,
  steps: number,
  classes: number,
  dict: readonly string[],
): { text: string; score: number } {
  if (classes !== dict.length) throw new Error(`the model has ${classes} classes, the dictionary ${dict.length}`)
  let text = ''
  let sum = 0
  let kept = 0
  let prev = -1
  for (let t = 0; t < steps; t++) {
    const row = t * classes
    let best = 0
    for (let c = 1; c < classes; c++) if (probs[row + c]! > probs[row + best]!) best = c
    if (best !== 0 && best !== prev) {
      text += dict[best]
      sum += probs[row + best]!
      kept++
    }
    prev = best
  }
  // Spaces at the ends come from the margin around the glyphs (and right padding), not the text.
  return { text: text.trim(), score: kept ? sum / kept : 0 }
}
