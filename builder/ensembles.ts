import { BundleError } from '../errors/index.js'
import type { ModelInfo } from '../store/index.js'
import type { EnsembleSpec, ResolvedConfig } from './config.js'

/**
 * Checks an ensemble's wiring (one producer per tensor, no cycles) and, given the models its
 * steps' runners serve, their inputs, outputs and dtypes; throws what is wrong. The CLI passes
 * the runners' own checks: the builder does not import runners.
 */
export type EnsembleChecker = (
  name: string,
  spec: EnsembleSpec,
  modelOf: (runner: string) => ModelInfo | undefined,
) => void

/**
 * bundle.yaml's ensembles: steps name the service's onnx runners, a step's `version` is the one
 * its runner serves, and the wiring fits the models' signatures. `modelOf` gives the model a
 * runner serves (the bundle's pin), or undefined where that is not known before start.
 */
export function checkEnsembles(
  cfg: ResolvedConfig,
  runners: readonly { name: string; kind: string }[],
  modelOf: (runner: string) => ModelInfo | undefined,
  check: EnsembleChecker | undefined,
): void {
  const models = runners.filter((r) => r.kind === 'onnx').map((r) => r.name)
  for (const [name, spec] of Object.entries(cfg.ensembles ?? {})) {
    const where = `${cfg.file}: ensembles.${name}`
    if (runners.some((r) => r.name === name))
      throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${where}: the service already has a runner named "${name}"`)
    spec.steps.forEach((s, i) => {
      if (!models.includes(s.model))
        throw new BundleError(
          'E_BUNDLE_CONFIG_INVALID',
          `${where}.steps.${i}.model: "${s.model}" is not an onnx runner of the service (runners: ` +
            `${models.join(', ') || 'none'})`,
        )
      const served = modelOf(s.model)
      if (s.version !== undefined && served !== undefined && s.version !== served.version) {
        throw new BundleError(
          'E_BUNDLE_CONFIG_INVALID',
          `${where}.steps.${i}.version: "${s.version}", but runner ${s.model} serves ${served.tag} (the version ` +
            `the bundle pins)`,
        )
      }
    })
    try {
      check?.(name, spec, modelOf)
    } catch (err) {
      throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${where}: ${(err as Error).message}`)
    }
  }
}
