// The error catalog is a leaf: every folder (store included) may import it, it imports nothing.
export { BundleError, isBundleError, type BundleErrorOptions } from './bundle-error.js'
export { didYouMean, similar } from './did-you-mean.js'
export { CATALOG, errorCodes, RETRYABLE_CODES, type CatalogEntry, type ErrorCode } from './catalog.js'
export { errorFromWire, errorToWire, isErrorCode, type WireError } from './wire.js'
export { ignore } from './ignore.js'
