import { BundleError, ignore } from '../errors/index.js'
import type { GraphSignature, TensorSignature } from './types.js'
import { quietOnnxRuntime } from './ort-env.js'

/** onnxruntime's public description of a model input or output (InferenceSession.inputMetadata). */
type OrtValueMetadata = import('onnxruntime-node').InferenceSession.ValueMetadata

function toSignature(meta: OrtValueMetadata): TensorSignature {
  const dims = meta.isTensor ? meta.shape : []
  return {
    name: meta.name,
    dtype: meta.isTensor ? meta.type : 'non-tensor',
    // -1 marks a variable dimension, as the Open Inference Protocol spells it.
    shape: dims.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
    dimNames: dims.map((d) => (typeof d === 'string' && d !== '' ? d : null)),
  }
}

/**
 * Reads an ONNX graph's inputs and outputs by loading it in onnxruntime-node. Imported lazily:
 * onnxruntime costs ~100 ms to load and most CLI commands never need it.
 */
export async function readOnnxSignature(file: string, displayName: string): Promise<GraphSignature> {
  quietOnnxRuntime()
  const ort = await import('onnxruntime-node')
  let session: Awaited<ReturnType<typeof ort.InferenceSession.create>> | undefined
  try {
    session = await ort.InferenceSession.create(file, {
      graphOptimizationLevel: 'disabled',
      // Reading the signature is not serving it: the model's warnings come from its workers, logged.
      logSeverityLevel: 3,
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
    })
    return { inputs: session.inputMetadata.map(toSignature), outputs: session.outputMetadata.map(toSignature) }
  } catch (cause) {
    const reason = ((cause as Error).message ?? String(cause)).split('\n')[0]
    throw new BundleError('E_STORE_ONNX_INVALID', `${displayName} is not a loadable ONNX model: ${reason}`, { cause })
  } finally {
    await session?.release().catch(ignore('the signature is read; a session that cannot release goes with the process'))
  }
}
