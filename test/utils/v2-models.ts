import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { ModelStore } from '../../store/index.js'
import { encodeModel, node } from './onnx-graph.js'
import { tempDir } from './tmp.js'
import { defineApi, defineService, io, type RunnerDeclaration } from '../../framework/index.js'
import { writeOnnxModel } from './onnx-builder.js'

// What the Open Inference Protocol tests serve: small models with known answers, in a service
// whose only API is a ping (the protocol's routes come with any service that has runners).

/**
 * Two inputs and two outputs of two types: y = −x (FP32 [n,3]), k_out = k (INT64 [n,2]).
 * Writes it to `path` and returns the path.
 */
export function writeTwoModel(path: string): string {
  return writeOnnxModel(path, {
    nodes: [
      { op: 'Neg', inputs: ['x'], outputs: ['y'] },
      { op: 'Identity', inputs: ['k'], outputs: ['k_out'] },
    ],
    inputs: [
      { name: 'x', dtype: 'float32', dims: ['n', 3] },
      { name: 'k', dtype: 'int64', dims: ['n', 2] },
    ],
    outputs: [
      { name: 'y', dtype: 'float32', dims: ['n', 3] },
      { name: 'k_out', dtype: 'int64', dims: ['n', 2] },
    ],
  })
}

/** A service named `name` with these runners and one ping API. */
export function runnersService(name: string, runners: readonly RunnerDeclaration[]) {
  return defineService({
    name,
    runners,
    apis: {
      ping: defineApi({
        input: io.json(z.object({})),
        output: io.json(z.object({ ok: z.boolean() })),
        handler: async () => ({ ok: true }),
      }),
    },
  })
}

/** Saves `neg:VERSION` (y = −x over [batch, 2] float32 rows) into the store at `home`. */
export async function saveNegModel(home: string, version = '1'): Promise<void> {
  const file = join(tempDir(), 'neg.onnx')
  writeFileSync(
    file,
    encodeModel({
      nodes: [node('Neg', ['x'], ['y'])],
      inputs: [{ name: 'x', dtype: 'float32', dims: ['batch', 2] }],
      outputs: [{ name: 'y', dtype: 'float32', dims: ['batch', 2] }],
    }),
  )
  const store = ModelStore.open({ home })
  try {
    await store.save({ name: 'neg', version, paths: [file] })
  } finally {
    store.close()
  }
}
