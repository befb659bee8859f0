// Bundles: bundle.yaml, build (esbuild), containerize and deploy. May import store/ and
// errors/; receives services as plain data and never imports framework/ (cli composes them).
export {
  buildBundle,
  planBundle,
  type BuildOptions,
  type BuildReport,
  type PackagedFile,
  type ServiceInfo,
} from './build.js'
export { readBundleConfig, type BundleConfig, type EnsembleSpec, type ResolvedConfig } from './config.js'
export { checkEnsembles, type EnsembleChecker } from './ensembles.js'
export { listedModels, modelForRunner, type ListedModel } from './pins.js'
export { MANIFEST_FILE, type BundleManifest } from './manifest.js'
export { renderDockerfile } from './templates.js'
export {
  containerize,
  dockerfileFor,
  pickBackend,
  BACKENDS,
  type Backend,
  type ContainerizeOptions,
  type ContainerizeResult,
} from './containerize.js'
export { k8sManifests, type K8sOptions } from './k8s.js'
export { SBOM_FILE, SBOM_LABEL } from './sbom-file.js'
