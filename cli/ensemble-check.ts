import type { EnsembleChecker } from '../builder/index.js'

/**
 * The runners' own checks of an ensemble, at build time (the builder does not import runners):
 * the wiring, then — where every step's model is known — its fit to their stored signatures,
 * the same check the server runs when the ensemble starts.
 */
export async function ensembleChecker(): Promise<EnsembleChecker> {
  const { planEnsemble, wireEnsemble, modelSignature } = await import('../runners/index.js')
  return (name, spec, modelOf) => {
    const plan = planEnsemble(name, spec)
    const signatures = new Map(
      spec.steps
        .map((s) => [s.model, modelOf(s.model)] as const)
        .map(([runner, m]) => [runner, m && modelSignature(m)]),
    )
    if ([...signatures.values()].some((sig) => sig === undefined)) return
    wireEnsemble(name, plan, (model) => signatures.get(model)!)
  }
}
