// The quickstart's two request bodies as wrk loads, shared by the benches that serve it: a PNG
// for `/classify` and a [1,3,48,192] float32 tensor for `/classifyTensor` (written into `dir`).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export type Load = { bodyFile: string; headers: Record<string, string> }

const PNG = fileURLToPath(new URL('../test/fixtures/images/hello-180.png', import.meta.url))

export function quickstartLoads(dir: string): { TENSOR: Load; IMAGE: Load } {
  const tensorFile = join(dir, 'tensor.bin')
  writeFileSync(tensorFile, new Uint8Array(new Float32Array(3 * 48 * 192).fill(0.25).buffer))
  return {
    TENSOR: {
      bodyFile: tensorFile,
      headers: { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,192' },
    },
    IMAGE: { bodyFile: PNG, headers: { 'content-type': 'image/png' } },
  }
}
