import type { RgbImage } from './recognize.js'

// PaddleOCR text detection (DB, "differentiable binarization"), the pieces around the det
// model: the input a page becomes, and text-line boxes from the probability map it returns.

/** Longest side a page is detected at (PaddleOCR's limit_side_len for v4 det). */
export const DET_LIMIT = 960
// ImageNet statistics, applied in PaddleOCR's channel order (it reads images as BGR).
const MEAN = [0.485, 0.456, 0.406]
const STD = [0.229, 0.224, 0.225]

/** The size a page of `width` × `height` is detected at: longest side ≤ `limit`, both multiples of 32. */
export function detSize(width: number, height: number, limit = DET_LIMIT): { width: number; height: number } {
  const scale = Math.min(1, limit / Math.max(width, height))
  const round = (n: number) => Math.max(32, Math.round((n * scale) / 32) * 32)
  return { width: round(width), height: round(height) }
}

/** The det model's input for a page already resized to detSize: BGR, ImageNet-normalised, CHW. */
export function toDetInput(img: RgbImage): Float32Array {
  const plane = img.width * img.height
  const out = new Float32Array(3 * plane)
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) out[c * plane + i] = (img.data[i * 3 + 2 - c]! / 255 - MEAN[c]!) / STD[c]!
  }
  return out
}

/** An axis-aligned text-line box in page pixels, and how sure the detector is of it. */
export interface TextBox {
  x1: number
  y1: number
  x2: number
  y2: number
  score: number
}

export interface BoxOptions {
  /** A pixel is text when its probability exceeds this (PaddleOCR det_db_thresh). */
  thresh?: number
  /** A region is kept when its mean probability reaches this (det_db_box_thresh). */
  boxThresh?: number
  /** How far a region grows back to the glyphs' full extent (det_db_unclip_ratio). */
  unclipRatio?: number
  /** Regions with a side shorter than this (map pixels) are noise. */
  minSize?: number
}

/**
 * Text-line boxes from the det model's probability map (`mapW` × `mapH`), scaled to a page of
 * `pageW` × `pageH`: threshold, connected regions (8-neighbour), a score per region, then each
 * region's box grown by area × ratio / perimeter, as DB shrinks text regions by that much when
 * it is trained. Boxes are axis-aligned: fit for horizontal text, which is what this example reads.
 */
export function boxesFromProbMap(
  prob: Float32Array,
  mapW: number,
  mapH: number,
  pageW: number,
  pageH: number,
  o: BoxOptions = {},
): TextBox[] {
  const thresh = o.thresh ?? 0.3
  const boxThresh = o.boxThresh ?? 0.6
  const unclipRatio = o.unclipRatio ?? 1.5
  const minSize = o.minSize ?? 3
  const seen = new Uint8Array(mapW * mapH)
  const stack = new Int32Array(mapW * mapH)
  const boxes: TextBox[] = []
  const sx = pageW / mapW
  const sy = pageH / mapH
  for (let start = 0; start < prob.length; start++) {
    if (seen[start] || prob[start]! <= thresh) continue
    // Flood fill one region, tracking its bounding box.
    let top = 0
    stack[top++] = start
    seen[start] = 1
    let x1 = mapW
    let y1 = mapH
    let x2 = -1
    let y2 = -1
    while (top > 0) {
      const p = stack[--top]!
      const x = p % mapW
      const y = (p - x) / mapW
      if (x < x1) x1 = x
      if (x > x2) x2 = x
      if (y < y1) y1 = y
      if (y > y2) y2 = y
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy
        if (ny < 0 || ny >= mapH) continue
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx
          if (nx < 0 || nx >= mapW) continue
          const q = ny * mapW + nx
          if (!seen[q] && prob[q]! > thresh) {
            seen[q] = 1
            stack[top++] = q
          }
        }
      }
    }
    const w = x2 - x1 + 1
    const h = y2 - y1 + 1
    if (Math.min(w, h) < minSize) continue
    let sum = 0
    for (let y = y1; y <= y2; y++) for (let x = x1; x <= x2; x++) sum += prob[y * mapW + x]!
    const score = sum / (w * h)
    if (score < boxThresh) continue
    const d = (w * h * unclipRatio) / (2 * (w + h))
    if (Math.min(w, h) + 2 * d < minSize + 2) continue
    boxes.push({
      x1: clamp(Math.round((x1 - d) * sx), 0, pageW - 1),
      y1: clamp(Math.round((y1 - d) * sy), 0, pageH - 1),
      x2: clamp(Math.round((x2 + 1 + d) * sx), 1, pageW),
      y2: clamp(Math.round((y2 + 1 + d) * sy), 1, pageH),
      score,
    })
  }
  return readingOrder(boxes)
}

const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v))

/**
 * Top to bottom; boxes whose vertical middles lie within half a line height of each other are
 * one row, read left to right.
 */
export function readingOrder<T extends { x1: number; y1: number; y2: number }>(boxes: T[]): T[] {
  const byTop = [...boxes].sort((a, b) => a.y1 - b.y1)
  const rows: T[][] = []
  for (const b of byTop) {
    const mid = (b.y1 + b.y2) / 2
    const row = rows.at(-1)
    const ref = row?.[0]
    if (ref && Math.abs(mid - (ref.y1 + ref.y2) / 2) < Math.min(b.y2 - b.y1, ref.y2 - ref.y1) / 2) row!.push(b)
    else rows.push([b])
  }
  return rows.flatMap((r) => r.sort((a, b) => a.x1 - b.x1))
}

/**
 * Rows of a page detected apart: the model sees `[top, bottom)`, and the boxes kept are those
 * whose vertical middles lie in `[keepFrom, keepTo)`.
 */
export interface DetBand {
  top: number
  bottom: number
  keepFrom: number
  keepTo: number
}

/**
 * How `/readStream` detects a page: a tall one as a head band and the rest, so the first lines
 * can be read while the rest of the page is still being detected. Each band also sees `context`
 * rows beyond the rows it keeps, so a line across the split is seen whole by the band that keeps
 * it (a line taller than `context` could be cut). A page under twice `head` rows is one band —
 * detected exactly as `/read` detects it.
 */
export function detBands(height: number, head = 192, context = 96): DetBand[] {
  if (height < 2 * head) return [{ top: 0, bottom: height, keepFrom: 0, keepTo: height }]
  return [
    { top: 0, bottom: head + context, keepFrom: 0, keepTo: head },
    { top: head - context, bottom: height, keepFrom: head, keepTo: height },
  ]
}
