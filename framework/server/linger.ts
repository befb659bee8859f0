import type { Socket } from 'node:net'

/** How long a closing connection goes on reading, and discarding, what its client still sends. */
export const LINGER_MS = 2_000

/**
 * Makes node's close of a connection after a `connection: close` answer a lingering close.
 *
 * The server answers some requests before their bodies have all arrived (an early refusal, a
 * 413, a 415) and closes the connection rather than read the rest. Node closes by destroying
 * the socket once the answer is written; bytes of the body still unread in the kernel then make
 * it send a reset, and a client still writing its body sees EPIPE or ECONNRESET — often before
 * it has read the answer, so a cheap 503 becomes a connection error. Here the close sends FIN
 * after the answer, goes on reading and throwing away what arrives until the client closes its
 * side (it has read the answer) or LINGER_MS passes, and only then destroys the socket.
 */
export function lingerOnClose(socket: Socket, lingerMs = LINGER_MS): void {
  // node's HTTP server ends a `connection: close` exchange with socket.destroySoon().
  socket.destroySoon = function lingeringClose(this: Socket): void {
    if (this.destroyed) return
    const timer = setTimeout(() => this.destroy(), lingerMs)
    timer.unref()
    this.once('close', () => clearTimeout(timer))
    this.once('end', () => this.destroy())
    this.end()
    this.resume()
  }
}
