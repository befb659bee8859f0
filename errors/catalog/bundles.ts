import { type CatalogEntry, entry } from './entry.js'

/** Bundles: building, images, deployment. */
export const BUNDLES = {
  // bundles
  E_BUNDLE_CONFIG_INVALID: entry(
    400,
    2,
    'bundle.yaml is missing, unreadable, or has an unknown key or a bad value; or a runner asks for another ' +
      'version than models: pins, an ensemble names a tensor its model lacks, or include: names what never ships ' +
      '(node_modules, .git, the store).',
    'Fix the key the message names; docs/bundles.md lists every key, the pin rule and what a bundle never carries.',
  ),
  E_BUNDLE_BUILD_FAILED: entry(
    400,
    1,
    'The service could not be compiled or its files collected.',
    'Fix the error the message quotes (file and line), then build again.',
  ),
  E_BUNDLE_NOT_FOUND: entry(
    404,
    1,
    'No stored bundle matches the tag.',
    'Run `bundle list` to see stored bundles, or build/import one first.',
  ),
  E_BUNDLE_EXISTS: entry(
    409,
    1,
    'A bundle is already stored under this name and version.',
    'Choose another --version or delete the existing bundle first.',
  ),
  E_BUNDLE_MODEL_MISMATCH: entry(
    409,
    1,
    'A model the bundle pins is missing or has different content than when the bundle was built.',
    'Import the bundle again (it carries its models) or build it again against the current models.',
  ),
  E_BUNDLE_DEPS_MISMATCH: entry(
    409,
    1,
    'The npm packages installed on this machine are not the versions the bundle was built with.',
    'Run npm ci in the project the bundle was built from, or build the bundle again here.',
  ),
  E_CONTAINER_BACKEND: entry(
    503,
    1,
    'No container engine is usable (podman, docker or buildah), or the image build failed.',
    'Install podman (docs/bundles.md "Containers"), or pass --backend; the message quotes the engine output.',
  ),
  E_CONTAINER_BASE_IMAGE: entry(
    503,
    1,
    'The container engine could not pull the base image (registry unreachable, image unknown, or access denied).',
    'Offline: pass --base-image with an image present locally, or build one with docker/local-base-image.sh -t ' +
      'localhost/modelbundle-node:20 node_modules and pass --base-image localhost/modelbundle-node:20.',
  ),
  E_BUNDLE_INVALID: entry(
    400,
    1,
    'A bundle file or archive is malformed, tampered with or incomplete.',
    'Export the bundle again from a good store; nothing was imported.',
  ),
} as const satisfies Record<string, CatalogEntry>
