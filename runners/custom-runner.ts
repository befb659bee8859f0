import { fileURLToPath } from 'node:url'
import { BackendRunner } from './backend-runner.js'
import { customBackend } from './custom/protocol.js'
import type { CustomRunnerOptions } from './custom/settings.js'
import type { BackendSpec } from './pool/protocol.js'

export type { CustomMethodOptions, CustomRunnerOptions } from './custom/settings.js'

/**
 * Arbitrary TypeScript (pre/post-processing, non-ONNX models) in worker processes. The module
 * is loaded in the worker, so it is named by path (or URL) and export, not passed as a value.
 *
 * @example
 * const tok = customRunner(
 *   { module: new URL('./tokenizer.ts', import.meta.url), export: 'Tokenizer' },
 *   { name: 'tokenizer', methods: { encode: { batchable: true } } },
 * )
 * const [ids] = await tok.batch<string, number[]>('encode', ['hello'])
 */
export class CustomRunner extends BackendRunner {
  declare readonly kind: 'custom'

  constructor(
    private readonly code: { module: string | URL; export: string },
    options: CustomRunnerOptions,
  ) {
    super({ kind: 'custom', module: code.module }, options)
  }

  /** The custom backend, loading the user's class in each worker. */
  protected override backend(): BackendSpec {
    const module = this.code.module instanceof URL ? fileURLToPath(this.code.module) : this.code.module
    return customBackend({ module, exportName: this.code.export })
  }

  protected override describe(): Record<string, unknown> {
    return { kind: this.kind, name: this.name, module: String(this.code.module), export: this.code.export }
  }
}

export const customRunner = (
  source: { module: string | URL; export: string },
  options: CustomRunnerOptions,
): CustomRunner => new CustomRunner(source, options)
