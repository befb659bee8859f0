import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { libuvQueued, pendingBytes, responseStarted, stopListening } from '../../framework/server/node-internals.js'

// The server reads two Node.js internals (framework/server/node-internals.ts); these fail if an
// upgrade of Node.js moves either, instead of the send-stall sweep or the parser's error answers
// silently doing nothing.

describe('the Node.js internals the server reads', () => {
  it("libuv's write queue is readable, and counts bytes a client does not read", { timeout: 30_000 }, async () => {
    const server = createServer()
    const accepted = once(server, 'connection') as Promise<[Socket]>
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
    client.pause() // reads nothing: what the server writes piles up
    const [socket] = await accepted
    try {
      assert.equal(libuvQueued(socket), 0, 'a connected socket has a write queue, empty')
      const chunk = Buffer.alloc(1 << 20)
      // Write until the kernel's buffers are full and node or libuv hold bytes.
      for (let i = 0; i < 64 && pendingBytes(socket) === 0; i++) socket.write(chunk)
      assert.ok(pendingBytes(socket) > 0, 'unsent bytes are counted')
    } finally {
      client.destroy()
      socket.destroy()
      server.close()
    }
  })

  it("a connection's response says when its headers are sent", { timeout: 30_000 }, async () => {
    const seen: boolean[] = []
    const server = createServer((req, res) => {
      seen.push(responseStarted(req.socket))
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.flushHeaders()
      seen.push(responseStarted(req.socket))
      res.end('ok')
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const r = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
      assert.equal(await r.text(), 'ok')
      assert.deepEqual(seen, [false, true])
    } finally {
      server.close()
    }
  })
})

describe('stopListening', () => {
  it('refuses new connections and leaves an accepted one without a request open, to be answered', {
    timeout: 30_000,
  }, async () => {
    const server = createServer((_req, res) => res.end('answered'))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const port = (server.address() as AddressInfo).port
    const accepted = once(server, 'connection')
    const early = connect(port, '127.0.0.1')
    await accepted
    const closed = stopListening(server)
    assert.equal(server.listening, false)
    // An http.Server.close() here would have destroyed `early`: it has sent nothing yet.
    let reply = ''
    early.on('data', (c) => (reply += c))
    const ended = once(early, 'end')
    early.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n')
    await ended
    assert.match(reply, /^HTTP\/1\.1 200 OK/)
    assert.match(reply, /answered$/)
    const refused = connect(port, '127.0.0.1')
    const [err] = (await once(refused, 'error')) as [NodeJS.ErrnoException]
    assert.equal(err.code, 'ECONNREFUSED')
    await closed
  })
})
