import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { boxesFromProbMap, detSize, readingOrder, toDetInput } from '../../examples/ocr/detect.js'
import { rotate180, toClsInput } from '../../examples/ocr/direction.js'

// The OCR example's pure pieces: det sizing and normalisation, DB boxes from a probability map,
// reading order, the direction classifier's input. test/examples/ocr-service.test.ts runs the
// whole pipeline on real models.

describe('examples/ocr: detection and direction pieces', () => {
  it('detects at multiples of 32 with the longest side at most 960, never upscaling', () => {
    assert.deepEqual(detSize(720, 304), { width: 736, height: 320 })
    assert.deepEqual(detSize(1920, 1080), { width: 960, height: 544 })
    assert.deepEqual(detSize(10, 5), { width: 32, height: 32 })
  })

  it('normalises in BGR order with ImageNet statistics', () => {
    const x = toDetInput({ data: new Uint8Array([255, 0, 0]), width: 1, height: 1 })
    // A red pixel: channel 0 is blue (0), channel 2 is red (255).
    assert.ok(Math.abs(x[0]! - (0 - 0.485) / 0.229) < 1e-6)
    assert.ok(Math.abs(x[2]! - (1 - 0.406) / 0.225) < 1e-6)
  })

  it('finds one box per text region, grown back by the unclip distance, scaled to the page', () => {
    const W = 40
    const H = 20
    const prob = new Float32Array(W * H)
    const fill = (x1: number, y1: number, x2: number, y2: number, p: number) => {
      for (let y = y1; y <= y2; y++) for (let x = x1; x <= x2; x++) prob[y * W + x] = p
    }
    fill(2, 2, 21, 5, 0.9) // a line: 20 × 4
    fill(25, 2, 34, 5, 0.4) // faint: above thresh, below boxThresh
    fill(2, 12, 31, 15, 0.95) // a second line
    prob[19 * W + 39] = 0.99 // a speck
    const boxes = boxesFromProbMap(prob, W, H, W * 2, H * 2)
    assert.equal(boxes.length, 2)
    // d = 20·4·1.5 / (2·24) = 2.5 → x from 2 − 2.5 to 22 + 2.5, times 2 for the page.
    assert.deepEqual({ ...boxes[0]!, score: undefined }, { x1: 0, y1: 0, x2: 49, y2: 17, score: undefined })
    assert.ok(Math.abs(boxes[0]!.score - 0.9) < 1e-6)
    assert.ok(boxes[1]!.y1 > boxes[0]!.y2 - 10 && boxes[1]!.x2 <= 80)
  })

  it('reads rows top to bottom and boxes within a row left to right', () => {
    const b = (x1: number, y1: number, y2: number) => ({ x1, y1, y2 })
    const order = readingOrder([b(400, 52, 80), b(40, 100, 128), b(40, 50, 78)])
    assert.deepEqual(
      order.map((x) => `${x.x1}:${x.y1}`),
      ['40:50', '400:52', '40:100'],
    )
  })

  it('feeds the classifier lines at most 192 wide, padded, and turns lines half a circle', () => {
    const line = { data: new Uint8Array(48 * 400 * 3).fill(255), width: 400, height: 48 }
    const x = toClsInput(line)
    assert.equal(x.length, 3 * 48 * 192)
    assert.equal(x[191], 1, 'squeezed to the full 192 columns')
    const narrow = toClsInput({ data: new Uint8Array(48 * 100 * 3).fill(255), width: 100, height: 48 })
    assert.equal(narrow[99], 1)
    assert.equal(narrow[100], 0, 'right-padded with zeros')
    const img = { data: new Uint8Array([1, 2, 3, 4, 5, 6]), width: 2, height: 1 }
    assert.deepEqual([...rotate180(img).data], [4, 5, 6, 1, 2, 3])
    assert.throws(() => toClsInput({ data: new Uint8Array(30), width: 10, height: 1 }), /48 pixels high/)
  })
})
