import type { Server } from 'node:http'
import { Server as NetServer, type Socket } from 'node:net'

// What the server needs of Node.js beyond http's public API, done here and nowhere else;
// test/framework/node-internals.test.ts fails if an upgrade of Node.js changes any of it.

type WithInternals = Socket & {
  _handle?: { writeQueueSize?: number } | null
  _httpMessage?: { headersSent?: boolean } | null
}

/** Bytes libuv still holds to write on the socket (it shrinks with every partial write); undefined if unknown. */
export function libuvQueued(socket: Socket): number | undefined {
  const size = (socket as WithInternals)._handle?.writeQueueSize
  return typeof size === 'number' ? size : undefined
}

/** Response bytes waiting to leave: node's write buffer plus libuv's queue. */
export function pendingBytes(socket: Socket): number {
  return socket.destroyed ? 0 : socket.writableLength + (libuvQueued(socket) ?? 0)
}

/** Whether the HTTP response on this connection has sent its headers (nothing else may be written then). */
export function responseStarted(socket: Socket): boolean {
  return (socket as WithInternals)._httpMessage?.headersSent === true
}

/**
 * Stops accepting connections and leaves every open one as it is. http's close() also closes the
 * idle ones, a connection just accepted whose request has not arrived yet among them: its client
 * sees a reset. net.Server's own close (http.Server's base class) does only the first part.
 * Resolves once every connection has closed.
 */
export function stopListening(server: Server): Promise<void> {
  return new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()))
}
