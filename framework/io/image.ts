import { BundleError } from '../../errors/index.js'
import { readForm } from './form.js'
import { baseMediaType, type IODescriptor, type RequestBody } from './types.js'

/** Decoded pixels: 8-bit RGB, row-major, `data.length === width * height * 3`. */
export interface Image {
  width: number
  height: number
  channels: 3
  data: Uint8Array
}

const ACCEPTED = ['image/png', 'image/jpeg', 'image/webp'] as const
// 64 megapixels: large scans pass, decompression bombs (tiny file, huge canvas) do not.
const MAX_PIXELS = 64 * 1024 * 1024

type Sharp = typeof import('sharp').default
let sharpModule: Promise<Sharp> | undefined
// sharp loads libvips (~50 ms): only services that use images pay for it.
const loadSharp = (): Promise<Sharp> => (sharpModule ??= import('sharp').then((m) => m.default))

/** The image part of a multipart body: the part named `image`, else the first file part. */
async function imagePart(body: RequestBody): Promise<Uint8Array> {
  // One image, plus room for a few form fields a browser form may add.
  const form = await readForm(body, 16)
  const named = form.get('image')
  const part = named !== null && typeof named !== 'string' ? named : [...form.values()].find((v) => typeof v !== 'string')
  if (part === undefined || typeof part === 'string') throw new BundleError('E_INPUT_INVALID', 'the multipart body has no file part (name it "image")')
  return new Uint8Array(await (part as Blob).arrayBuffer())
}

/**
 * A PNG, JPEG or WebP body — raw, or as the `image` part of a multipart form — decoded with
 * sharp into RGB pixels (alpha is flattened on white). Responses are encoded as PNG.
 */
export function image(): IODescriptor<Image, Image> {
  return {
    kind: 'image',
    mediaTypes: [...ACCEPTED, 'multipart/form-data'],
    async decode(body) {
      const sharp = await loadSharp()
      const bytes = baseMediaType(body.contentType) === 'multipart/form-data' ? await imagePart(body) : await body.bytes()
      // sharp throws at once (not in its promise) on an empty buffer.
      if (bytes.byteLength === 0) throw new BundleError('E_INPUT_INVALID', 'the request body is empty; send a PNG, JPEG or WebP image')
      // sharp reads whatever format the bytes are; only what this API declares is accepted
      // (an SVG or TIFF sent as image/png could rasterise to a huge canvas).
      const format = await Promise.resolve()
        .then(() => sharp(bytes, { limitInputPixels: MAX_PIXELS }).metadata())
        .then((m) => m.format as string | undefined)
        .catch(() => undefined)
      if (format !== 'png' && format !== 'jpeg' && format !== 'webp') {
        throw new BundleError('E_INPUT_INVALID', `request body is not a PNG, JPEG or WebP image${format ? ` (it is ${format})` : ''}`)
      }
      try {
        const { data, info } = await sharp(bytes, { limitInputPixels: MAX_PIXELS, failOn: 'error' })
          .flatten({ background: '#ffffff' })
          .removeAlpha()
          .toColourspace('srgb')
          .raw()
          .toBuffer({ resolveWithObject: true })
        return { width: info.width, height: info.height, channels: 3, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) }
      } catch (err) {
        throw new BundleError('E_INPUT_INVALID', `request body is not a decodable PNG, JPEG or WebP image: ${(err as Error).message}`)
      }
    },
    async encode(value) {
      if (!value || !(value.data instanceof Uint8Array) || value.data.length !== value.width * value.height * 3) {
        throw new BundleError('E_OUTPUT_INVALID', 'the API output is an image: return { width, height, channels: 3, data } with width*height*3 bytes')
      }
      const sharp = await loadSharp()
      const png = await sharp(value.data, { raw: { width: value.width, height: value.height, channels: 3 } }).png().toBuffer()
      return { body: new Uint8Array(png.buffer, png.byteOffset, png.byteLength), contentType: 'image/png' }
    },
    openapi: () => ({
      ...Object.fromEntries(ACCEPTED.map((m) => [m, { schema: { type: 'string', contentMediaType: m } }])),
      'multipart/form-data': { schema: { type: 'object', required: ['image'], properties: { image: { type: 'string', contentMediaType: 'image/png' } } } },
    }),
  }
}
