// The ONNX backend: what a worker of an onnx runner loads (runners/pool/backend.ts's contract).
// onnxruntime-node is imported only here, in workers: its run() is a blocking native call.
import { quietOnnxRuntime } from '../../store/ort-env.js'
import type { Backend, BackendContext } from '../pool/backend.js'
import type { WireTensor } from '../pool/protocol.js'
import { encodeStrings, fromWire } from '../tensor.js'
import { ONNX_RUN, type OnnxRunArgs, type OnnxRunResult } from './protocol.js'

export interface OnnxBackendOptions {
  modelPath: string
  executionProviders?: string[]
  intraOpThreads?: number
}

/** One loaded model: feeds in, every (or the named) output out. */
export type OnnxRun = (inputs: Record<string, WireTensor>, outputs?: string[]) => Promise<OnnxRunResult>

/** The model as a session, and its run as WireTensors in and out (the sequence backend wraps it too). */
export async function openSession(
  o: OnnxBackendOptions,
): Promise<{ run: OnnxRun; inputs: readonly string[]; outputs: readonly string[]; release: () => Promise<void> }> {
  quietOnnxRuntime()
  const ort = await import('onnxruntime-node')
  // onnxruntime writes only what the server's log level keeps (the pool sets it; its lines come
  // back to the server's logger through this worker's stderr, worker-output.ts).
  const severity = Number(process.env.BUNDLE_ORT_LOG_SEVERITY ?? 2)
  ort.env.logLevel = (['verbose', 'info', 'warning', 'error', 'fatal'] as const)[severity] ?? 'warning'
  const providers = o.executionProviders ?? ['cpu']
  let session: Awaited<ReturnType<typeof ort.InferenceSession.create>>
  try {
    session = await ort.InferenceSession.create(o.modelPath, {
      executionProviders: providers as never,
      logSeverityLevel: severity as 0 | 1 | 2 | 3 | 4,
      ...(o.intraOpThreads ? { intraOpNumThreads: o.intraOpThreads } : {}),
    })
  } catch (err) {
    throw providers.includes('cuda') ? cudaUnavailable(err) : err
  }
  // onnxruntime reads inputs in place, and some of its kernels sum in an order that depends on the
  // data's alignment (a ReduceSum over bytes at offset 8 of a 16-byte boundary differs in the last
  // bit from the same bytes aligned): bytes off a 16-byte boundary (inline IPC bytes may be) are
  // copied to a fresh buffer, as a caller's own typed array would be, so answers equal a direct run.
  const toOrt = (w: WireTensor) => {
    const t = fromWire(w.data.byteOffset % 16 === 0 ? w : { ...w, data: w.data.slice() })
    return new ort.Tensor(t.dtype as never, t.data as never, t.shape)
  }
  const run: OnnxRun = async (inputs, outputs) => {
    const feeds = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, toOrt(t)]))
    const result = outputs ? await session.run(feeds, outputs) : await session.run(feeds)
    return Object.fromEntries(Object.entries(result).map(([k, t]) => [k, toWire(t)]))
  }
  return { run, inputs: session.inputNames, outputs: session.outputNames, release: () => session.release() }
}

/** An onnxruntime output as a WireTensor: its own bytes, not a copy. */
function toWire(t: { type: string; dims: readonly number[]; data: unknown }): WireTensor {
  if (t.type === 'string') return { dtype: 'string', shape: [...t.dims], data: encodeStrings(t.data as string[]) }
  const view = t.data as ArrayBufferView
  return { dtype: t.type, shape: [...t.dims], data: new Uint8Array(view.buffer, view.byteOffset, view.byteLength) }
}

/** The usual cause: onnxruntime-node was installed without its CUDA binaries. */
function cudaUnavailable(err: unknown): Error {
  return Object.assign(
    new Error(
      `onnxruntime could not start the CUDA execution provider (${(err as Error).message.split('\n')[0]}); on ` +
        `a machine with CUDA 12, fetch its CUDA binaries with \`ONNXRUNTIME_NODE_INSTALL=cuda12 node ` +
        `node_modules/onnxruntime-node/script/install\``,
    ),
    { code: 'E_RUNNER_GPU_UNAVAILABLE' },
  )
}

/** The methods of an onnx runner's worker: ONNX_RUN (a batch) and `metadata`. */
export function onnxMethods(session: Awaited<ReturnType<typeof openSession>>): Backend['methods'] {
  return {
    async [ONNX_RUN](args: unknown): Promise<OnnxRunResult> {
      // A worker gets every tensor whole (gathered ones were written or joined on the way).
      const { inputs, outputs } = args as OnnxRunArgs & { inputs: Record<string, WireTensor> }
      return session.run(inputs, outputs)
    },
    async metadata() {
      return { inputs: session.inputs, outputs: session.outputs }
    },
  }
}

export async function load(options: unknown, _context: BackendContext): Promise<Backend> {
  const session = await openSession(options as OnnxBackendOptions)
  // onnxruntime has read its inputs when run() resolves: their memory may serve the next call.
  return { methods: onnxMethods(session), releasesInputs: true }
}
