import type { FileValue } from '../io/file.js'
import type { Image } from '../io/image.js'
import type { DType, Tensor, TypedArrayOf } from '../io/tensor.js'

// A service class's methods are typed by what they receive after decoding (pixels, typed arrays)
// and what they return before encoding; a client holds neither, it holds the wire forms. These
// types map one onto the other by the decoded types of the IO descriptors, the only trace of the
// descriptors a class's type keeps (decorators cannot change it).

type IsAny<T> = 0 extends 1 & T ? true : false

/** What io.image(), io.file() (audio included) and io.bytes() decode into. */
type Binary = Image | FileValue | Uint8Array

/**
 * A binary input (io.image, io.file, io.bytes) as the client sends it: bytes with their media
 * type (a Buffer from `readFileSync` is a Uint8Array), bare bytes, or a Blob or File (its `type`
 * is the media type). Without a media type the API's first declared one is sent.
 *
 * @example
 * await client.direction({ bytes: readFileSync('line.png'), mediaType: 'image/png' })
 */
export type BinaryInput = Uint8Array | Blob | { bytes: Uint8Array; mediaType?: string; filename?: string }

/** Row-major tensor values as JSON: flat, or nested as deep as the shape. */
export type TensorValues<T> = readonly (T | TensorValues<T>)[]

type JsonValueOf<D extends DType> = D extends 'string' ? string : D extends 'bool' ? boolean | 0 | 1 : number

/**
 * A tensor input (io.tensor) as the client sends it: data as the dtype's typed array (sent as raw
 * little-endian bytes with X-Tensor-Shape, exact for every dtype), or as JSON values, flat or
 * nested (numbers; booleans for bool; strings for string). `dtype` may be left out.
 *
 * @example
 * await client.classify({ dtype: 'float32', shape: [1, 3], data: new Float32Array([0.1, 0.2, 0.7]) })
 * await client.classify({ shape: [1, 3], data: [[0.1, 0.2, 0.7]] })
 */
export type TensorInput<D extends DType> =
  | { dtype?: D; shape: readonly number[]; data: TypedArrayOf<D> }
  | { dtype?: D; shape: readonly number[]; data: TensorValues<JsonValueOf<D>> }

/** True when the decoded type is one whose wire form differs from it (binary or tensor). */
type IsWire<T> = IsAny<T> extends true ? false : [T] extends [Binary | Tensor] ? true : false

/** An object with some binary or tensor field: what io.multipart() decodes into. */
type IsMultipart<T> = T extends readonly unknown[] | ((...args: never[]) => unknown)
  ? false
  : T extends object
    ? true extends { [K in keyof T]-?: IsWire<T[K]> }[keyof T]
      ? true
      : false
    : false

type ValueInput<T> = T extends Binary ? BinaryInput : T extends Tensor<infer D extends DType> ? TensorInput<D> : T

type ValueOutput<T> = T extends Binary ? FileValue : T

/**
 * What a client call takes for an API whose method receives `T`: binary and tensor inputs in
 * their wire forms ({@link BinaryInput}, {@link TensorInput}), a multipart input as an object of
 * them, JSON and text as the method receives them.
 */
export type ClientInput<T> =
  IsAny<T> extends true
    ? T
    : T extends Binary | Tensor
      ? ValueInput<T>
      : IsMultipart<T> extends true
        ? { [K in keyof T]: ValueInput<T[K]> }
        : T

/**
 * What a client call resolves to for an API whose method returns `T`: binary answers (images as
 * PNG, files, bytes) as `{ bytes, mediaType, filename? }`, tensors with typed-array data, a
 * multipart answer as an object of its parts, JSON and text as they are.
 */
export type ClientValue<T> =
  IsAny<T> extends true
    ? T
    : T extends Binary | Tensor
      ? ValueOutput<T>
      : IsMultipart<T> extends true
        ? { [K in keyof T]: ValueOutput<T[K]> }
        : T
