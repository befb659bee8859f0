import { BundleError, CATALOG, type ErrorCode, ignore } from '../../errors/index.js'

/** One Server-Sent Event: its type (`message` unless named) and its data lines joined. */
export interface ServerEvent {
  event: string
  data: string
}

/** Parses a text/event-stream body into events as they arrive (the WHATWG format: fields, blank line ends one). */
export async function* serverEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ''
  let event = 'message'
  let data: string[] = []
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      buffer += value
      let nl = buffer.search(/\r\n|\r|\n/)
      while (nl !== -1) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? nl + 2 : nl + 1)
        nl = buffer.search(/\r\n|\r|\n/)
        if (line === '') {
          if (data.length) yield { event, data: data.join('\n') }
          event = 'message'
          data = []
          continue
        }
        if (line.startsWith(':')) continue // a comment (keep-alive)
        const colon = line.indexOf(':')
        const field = colon === -1 ? line : line.slice(0, colon)
        const text = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'event') event = text
        else if (field === 'data') data.push(text)
      }
    }
  } finally {
    // Leaving early (a break in for await) cancels the response: the server stops the stream.
    await reader.cancel().catch(ignore('done reading: cancelling only frees the stream'))
  }
}

/**
 * The items of an io.stream answer read as Server-Sent Events: each `data:` event parsed as
 * JSON; an `error` event thrown as the BundleError it carries; `end` ends the iteration. A
 * connection that closes before `end` throws E_CLIENT_CONNECTION, so a cut stream is never
 * taken for a whole one.
 */
export async function* streamItems<T>(body: ReadableStream<Uint8Array>, route: string): AsyncGenerator<T> {
  for await (const e of serverEvents(body)) {
    if (e.event === 'end') return
    if (e.event === 'error') {
      const { error } = JSON.parse(e.data) as { error: { code?: string; message?: string; details?: unknown } }
      const code =
        error.code !== undefined && Object.hasOwn(CATALOG, error.code) ? (error.code as ErrorCode) : 'E_INTERNAL'
      throw new BundleError(code, error.message ?? `${route} failed mid-stream`, { details: error.details })
    }
    yield JSON.parse(e.data) as T
  }
  throw new BundleError('E_CLIENT_CONNECTION', `${route}: the stream ended before the server finished it`)
}
