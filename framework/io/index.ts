import { bytes } from './bytes.js'
import { file } from './file.js'
import { image } from './image.js'
import { json } from './json.js'
import { multipart } from './multipart.js'
import { tensor } from './tensor.js'
import { stream } from './stream.js'
import { text } from './text.js'

/** Input/output types for `@api`: how a body is decoded, validated, typed and documented. */
export const io = { json, text, bytes, image, file, tensor, multipart, stream } as const

export type { FileValue } from './file.js'
export type { Image, ImageOptions, ImageResize } from './image.js'
export type { MultipartOptions } from './multipart.js'
export type { DType, Tensor, TypedArrayOf } from './tensor.js'
export { DTYPES, SHAPE_HEADER, DTYPE_HEADER } from './tensor.js'
export type { EncodedBody, IODescriptor, InputOf, OutputOf, RequestBody, StreamBody } from './types.js'
export { baseMediaType, isStreamBody, mediaTypeMatches } from './types.js'
export { issuesOf } from './json.js'
export { isStreamDescriptor, NDJSON, SSE, type StreamDescriptor } from './stream.js'
