import { randomUUID } from 'node:crypto'
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { ServiceApp } from '../app.js'
import { responseStarted } from '../node-internals.js'
import type { Connections } from './connections.js'
import type { Timeouts } from './http-server.js'

/** The answer to an error node's HTTP parser raised: [status, reason phrase, code, message]. */
function answerFor(err: NodeJS.ErrnoException, maxHeaderBytes: number, t: Timeouts): [number, string, string, string] {
  if (err.code === 'HPE_HEADER_OVERFLOW')
    return [
      431,
      'Request Header Fields Too Large',
      'E_HTTP_HEADERS_TOO_LARGE',
      `the request line and headers are larger than ${maxHeaderBytes} bytes`,
    ]
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return [
      408,
      'Request Timeout',
      'E_HTTP_REQUEST_TIMEOUT',
      `the request was not received in time (headers within ${t.headersTimeout} ms, all of it within ` +
        `${t.requestTimeout} ms)`,
    ]
  return [400, 'Bad Request', 'E_INPUT_INVALID', 'the request is not valid HTTP']
}

/**
 * Errors node answers before the app sees the request (malformed HTTP, headers too large,
 * headers or request not in time) get the same JSON shape as every other error.
 */
export function answerClientErrors(
  server: Server,
  service: ServiceApp,
  connections: Connections,
  maxHeaderBytes: number,
  t: Timeouts,
): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') connections.closedEarly('slow_request')
    // Nothing to write to a gone client, or after a response has started (its bytes would corrupt it).
    if (err.code === 'ECONNRESET' || !socket.writable || responseStarted(socket)) return void socket.destroy()
    const [status, text, code, message] = answerFor(err, maxHeaderBytes, t)
    const requestId = randomUUID()
    const body = JSON.stringify({ error: { code, message, requestId } })
    // Write the answer, then drop the connection: a client trickling headers must not keep it.
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ` +
        `${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    )
    // A write the client does not read must not keep the socket either.
    setTimeout(() => socket.destroy(), 1_000).unref()
    service.log.info({ status, requestId, reason: err.code }, 'request refused by the HTTP parser')
  })
}
