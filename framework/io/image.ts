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
  const part =
    named !== null && typeof named !== 'string' ? named : [...form.values()].find((v) => typeof v !== 'string')
  if (part === undefined || typeof part === 'string')
    throw new BundleError('E_INPUT_INVALID', 'the multipart body has no file part (name it "image")')
  return new Uint8Array(await (part as Blob).arrayBuffer())
}

/**
 * Resize applied in the same sharp pass that decodes the image (one libvips pipeline, no
 * second decode of full-size pixels in the service):
 * - `{ width, height }`: exactly this size, by `fit` (default `fill`: stretched, as most
 *   models' preprocessing does; `inside`/`contain`/`cover` as in sharp).
 * - `{ height }` alone (or `{ width }` alone): scaled to it keeping the aspect ratio; with
 *   `maxWidth` (or `maxHeight`) the other side is clamped, squeezing images wider than that —
 *   e.g. `{ height: 48, maxWidth: 192 }`, the input of text-line recognisers.
 */
export interface ImageResize {
  width?: number
  height?: number
  maxWidth?: number
  maxHeight?: number
  fit?: 'fill' | 'inside' | 'contain' | 'cover'
}

export interface ImageOptions {
  /** Resize while decoding; the handler gets the resized pixels. */
  resize?: ImageResize
}

// The formats by their first bytes: no libvips call (and no thread-pool hop) to learn them.
function sniff(b: Uint8Array): 'png' | 'jpeg' | 'webp' | undefined {
  if (
    b.length >= 8 &&
    b[0] === 0x89 &&
    b[1] === 0x50 &&
    b[2] === 0x4e &&
    b[3] === 0x47 &&
    b[4] === 0x0d &&
    b[5] === 0x0a &&
    b[6] === 0x1a &&
    b[7] === 0x0a
  )
    return 'png'
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg'
  if (
    b.length >= 12 &&
    String.fromCharCode(b[0]!, b[1]!, b[2]!, b[3]!) === 'RIFF' &&
    String.fromCharCode(b[8]!, b[9]!, b[10]!, b[11]!) === 'WEBP'
  )
    return 'webp'
  return undefined
}

function checkResize(r: ImageResize): ImageResize {
  const where = 'io.image({ resize })'
  for (const k of ['width', 'height', 'maxWidth', 'maxHeight'] as const) {
    const v = r[k]
    if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > 16384))
      throw new BundleError(
        'E_SERVICE_DEFINITION',
        `${where}: ${k} must be a whole number of pixels from 1 to 16384, got ${String(v)}`,
      )
  }
  if (r.width === undefined && r.height === undefined)
    throw new BundleError('E_SERVICE_DEFINITION', `${where}: give width, height or both`)
  if (r.fit !== undefined && !['fill', 'inside', 'contain', 'cover'].includes(r.fit))
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      `${where}: fit must be fill, inside, contain or cover, got ${String(r.fit)}`,
    )
  if (r.fit !== undefined && (r.width === undefined || r.height === undefined))
    throw new BundleError('E_SERVICE_DEFINITION', `${where}: fit needs both width and height`)
  return { ...r }
}

/** The target size for a source of w × h (only called when one side follows the aspect ratio). */
export function aspectSize(r: ImageResize, w: number, h: number): { width: number; height: number } {
  if (r.height !== undefined) {
    const width = Math.max(1, Math.min(r.maxWidth ?? Infinity, Math.round((w * r.height) / h)))
    return { width, height: r.height }
  }
  const height = Math.max(1, Math.min(r.maxHeight ?? Infinity, Math.round((h * r.width!) / w)))
  return { width: r.width!, height }
}

/**
 * A PNG, JPEG or WebP body — raw, or as the `image` part of a multipart form — decoded with
 * sharp into RGB pixels (alpha is flattened on white), resized in the same pass when
 * `resize` is given. Responses are encoded as PNG.
 */
export function image(options: ImageOptions = {}): IODescriptor<Image, Image> {
  const resize = options.resize ? checkResize(options.resize) : undefined
  const both = resize?.width !== undefined && resize.height !== undefined
  return {
    kind: 'image',
    mediaTypes: [...ACCEPTED, 'multipart/form-data'],
    async decode(body) {
      const sharp = await loadSharp()
      const bytes =
        baseMediaType(body.contentType) === 'multipart/form-data' ? await imagePart(body) : await body.bytes()
      // sharp throws at once (not in its promise) on an empty buffer.
      if (bytes.byteLength === 0)
        throw new BundleError('E_INPUT_INVALID', 'the request body is empty; send a PNG, JPEG or WebP image')
      // sharp reads whatever format the bytes are; only what this API declares is accepted
      // (an SVG or TIFF sent as image/png could rasterise to a huge canvas).
      if (sniff(bytes) === undefined) {
        // What sharp makes of it, for the message; nothing when it cannot read it either.
        const format = await Promise.resolve()
          .then(() => sharp(bytes).metadata())
          .then((m) => m.format as string | undefined)
          .catch(() => undefined)
        throw new BundleError(
          'E_INPUT_INVALID',
          `request body is not a PNG, JPEG or WebP image${format ? ` (it is ${format})` : ''}`,
        )
      }
      try {
        let pipeline = sharp(bytes, { limitInputPixels: MAX_PIXELS, failOn: 'error' })
        if (resize) {
          let size = { width: resize.width!, height: resize.height! }
          if (!both) {
            // Only the header is read here; the pixels are decoded once, below.
            const m = await pipeline.metadata()
            size = aspectSize(resize, m.width!, m.height!)
          }
          pipeline = pipeline.resize({ ...size, fit: resize.fit ?? 'fill' })
        }
        const { data, info } = await pipeline
          .flatten({ background: '#ffffff' })
          .removeAlpha()
          .toColourspace('srgb')
          .raw()
          .toBuffer({ resolveWithObject: true })
        return {
          width: info.width,
          height: info.height,
          channels: 3,
          data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
        }
      } catch (err) {
        throw new BundleError(
          'E_INPUT_INVALID',
          `request body is not a decodable PNG, JPEG or WebP image: ${(err as Error).message}`,
        )
      }
    },
    async encode(value) {
      if (!value || !(value.data instanceof Uint8Array) || value.data.length !== value.width * value.height * 3) {
        throw new BundleError(
          'E_OUTPUT_INVALID',
          'the API output is an image: return { width, height, channels: 3, data } with width*height*3 bytes',
        )
      }
      const sharp = await loadSharp()
      const png = await sharp(value.data, { raw: { width: value.width, height: value.height, channels: 3 } })
        .png()
        .toBuffer()
      return { body: new Uint8Array(png.buffer, png.byteOffset, png.byteLength), contentType: 'image/png' }
    },
    openapi: () => ({
      ...Object.fromEntries(ACCEPTED.map((m) => [m, { schema: { type: 'string', contentMediaType: m } }])),
      'multipart/form-data': {
        schema: {
          type: 'object',
          required: ['image'],
          properties: { image: { type: 'string', contentMediaType: 'image/png' } },
        },
      },
    }),
  }
}
