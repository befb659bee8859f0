// Where a bundle keeps its SBOM and the OCI label an image points at it with. Apart from sbom.ts:
// what reads them (containerize, `bundle sbom`, an image) does not load the CycloneDX library,
// which is build-only (left out of images).

export const SBOM_FILE = 'sbom.cdx.json'
export const SBOM_LABEL = 'dev.modelbundle.sbom'
