import { BundleError } from '../../errors/index.js'
import {
  baseMediaType,
  type IODescriptor,
  type InputOf,
  type JsonSchema,
  type OutputOf,
  type StreamBody,
  wholeBody,
} from './types.js'

/** Server-Sent Events: what browsers' EventSource and the typed client read. */
export const SSE = 'text/event-stream'
/** Newline-delimited JSON: one item a line, for clients that do not ask for events (curl). */
export const NDJSON = 'application/x-ndjson'

/**
 * A stream of items. As an output, the answer's items as they come (SSE or NDJSON; over a
 * WebSocket, one message each). As an input, the messages of a WebSocket: an API whose input is
 * a stream is served as a WebSocket route (GET with Upgrade), its output a stream too.
 */
export interface StreamDescriptor<D extends IODescriptor<any, any>>
  extends IODescriptor<AsyncIterable<InputOf<D>>, AsyncIterable<OutputOf<D>>> {
  readonly kind: 'stream'
  /** How each item is encoded and documented (io.json, io.text, or io.bytes for WebSocket messages). */
  readonly item: D
  /** An incoming WebSocket message as the item the API receives (validated). */
  fromMessage(data: string | Uint8Array): InputOf<D> | Promise<InputOf<D>>
  /** An item as one WebSocket message: text for json and text items, binary for bytes. */
  toMessage(value: OutputOf<D>): Promise<string | Uint8Array>
}

export const isStreamDescriptor = (d: IODescriptor<any, any>): d is StreamDescriptor<IODescriptor<any, any>> =>
  d.kind === 'stream'

/** An item as one line of JSON text (validated by the item's descriptor, as a plain answer would be). */
async function itemJson(item: IODescriptor<any, any>, value: unknown): Promise<string> {
  const encoded = wholeBody(await item.encode(value), 'a stream item')
  const body = typeof encoded === 'string' ? encoded : Buffer.from(encoded).toString('utf8')
  // A text item travels as a JSON string, so a line or an event never holds a raw newline.
  return item.kind === 'json' ? body : JSON.stringify(body)
}

async function* events(source: AsyncIterable<unknown>, item: IODescriptor<any, any>): AsyncGenerator<string> {
  let id = 0
  for await (const value of source) yield `id: ${id++}\ndata: ${await itemJson(item, value)}\n\n`
  // An explicit end: a client can tell a finished stream from a connection cut short.
  yield 'event: end\ndata: {}\n\n'
}

async function* lines(source: AsyncIterable<unknown>, item: IODescriptor<any, any>): AsyncGenerator<string> {
  for await (const value of source) yield `${await itemJson(item, value)}\n`
}

/**
 * An API whose answer is a stream of items: the method is an `async *` generator (or returns
 * any AsyncIterable), and each item goes out as soon as it is yielded — as Server-Sent Events
 * when the client accepts `text/event-stream`, else as newline-delimited JSON. A client that
 * goes away stops the generator (its `finally` runs) and cancels the runner calls it has queued.
 *
 * @example
 * @api({ input: io.json(Prompt), output: io.stream(io.json(z.object({ token: z.string() }))) })
 * async *generate({ text }: { text: string }) { for (const token of text.split(' ')) yield { token } }
 */
export function stream<D extends IODescriptor<any, any>>(item: D): StreamDescriptor<D> {
  if (item.kind !== 'json' && item.kind !== 'text' && item.kind !== 'bytes')
    throw new BundleError(
      'E_SERVICE_DEFINITION',
      `io.stream takes io.json(…), io.text() or io.bytes() items, not ${item.kind}`,
    )
  const schema = Object.values(item.openapi())[0]?.schema ?? {}
  const itemSchema: JsonSchema = item.kind === 'text' ? { type: 'string' } : schema
  const expected = item.kind === 'bytes' ? 'binary' : 'text'
  return {
    kind: 'stream',
    item,
    mediaTypes: [SSE, NDJSON],
    decode() {
      throw new BundleError('E_SERVICE_DEFINITION', 'a stream input is read from a WebSocket, not a request body')
    },
    fromMessage(data) {
      if ((typeof data === 'string') !== (expected === 'text'))
        throw new BundleError('E_INPUT_INVALID', `this WebSocket takes ${expected} messages`)
      const raw = typeof data === 'string' ? Buffer.from(data) : data
      return item.decode({
        contentType: item.mediaTypes[0]!,
        headers: { get: () => null },
        raw,
        bytes: () => Promise.resolve(raw),
        formData: () => Promise.reject(new Error('not a form')),
      })
    },
    async toMessage(value) {
      const body = wholeBody(await item.encode(value), 'a stream item')
      // json and text items as text messages, bytes as binary ones.
      return body
    },
    encode(value, accept) {
      if (item.kind === 'bytes')
        throw new BundleError('E_SERVICE_DEFINITION', 'io.stream(io.bytes()) answers only WebSocket routes')
      if (value === null || typeof (value as AsyncIterable<unknown>)?.[Symbol.asyncIterator] !== 'function')
        throw new BundleError(
          'E_OUTPUT_INVALID',
          'the API returned something that is not an async iterable; its output is a stream (use async *)',
        )
      const sse = (accept ?? '').split(',').some((t) => baseMediaType(t) === SSE)
      const body: StreamBody = sse
        ? {
            chunks: events(value, item),
            failure: (error) => `event: error\ndata: ${JSON.stringify({ error })}\n\n`,
          }
        : { chunks: lines(value, item), failure: (error) => `${JSON.stringify({ error })}\n` }
      return {
        body,
        contentType: sse ? `${SSE}; charset=utf-8` : NDJSON,
        // Proxies (nginx) must pass each item on as it comes, not buffer the answer.
        headers: { 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
      }
    },
    // OpenAPI 3.2's itemSchema says what each event or line holds; 3.1 tools show the schema.
    openapi: () => ({
      [SSE]: {
        schema: { type: 'string', description: 'one `data:` event per item, then `event: end`' },
        itemSchema,
      },
      [NDJSON]: { schema: { type: 'string', description: 'one JSON item per line' }, itemSchema },
    }),
  }
}
