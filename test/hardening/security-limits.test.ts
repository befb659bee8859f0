import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { connect } from 'node:net'
import { deflateSync, gzipSync } from 'node:zlib'
import { defineApi, defineService, io, serve, type ServiceApp } from '../../framework/index.js'
import { chunked, MAX_BODY, post, useSecureService, silent } from './secure-service.js'

// Body, header and multipart limits on the app every route goes through, and over a real socket.
describe('security defaults: limits', () => {
  let svc: ServiceApp
  useSecureService((s) => (svc = s))

  describe('limits', () => {
    it(
      'a chunked body with no Content-Length is cut off ' + 'at the body limit: 413, and the connection closes',
      async () => {
        for (const [path, type] of [
          ['/echo', 'application/json'],
          ['/v2/models/ident/infer', 'application/json'],
          ['/v2/repository/models/ident/load', 'application/json'],
          ['/job/submit', 'application/json'],
        ] as const) {
          const r = await post(svc.app, path, chunked(MAX_BODY + 1), { 'content-type': type })
          assert.equal(r.status, 413, path)
          assert.equal(r.headers.get('connection'), 'close', path)
          const body = (await r.json()) as { error: string | { code: string } }
          if (!path.startsWith('/v2')) assert.equal((body.error as { code: string }).code, 'E_HTTP_PAYLOAD_TOO_LARGE')
        }
        // At the limit it passes (a JSON body of spaces around a small value).
        const fits = `{"v":1}${' '.repeat(MAX_BODY - 7)}`
        assert.equal((await post(svc.app, '/echo', fits, { 'content-type': 'application/json' })).status, 200)
      },
    )

    it(
      'gzip and deflate bodies are expanded within the body ' + 'limit: a small bomb is a 413, an honest body works',
      async () => {
        const bomb = `{"v":1}${' '.repeat(4 * MAX_BODY)}`
        for (const [enc, zip] of [
          ['gzip', gzipSync],
          ['deflate', deflateSync],
        ] as const) {
          const packed = zip(Buffer.from(bomb))
          assert.ok(packed.length < MAX_BODY / 8, 'the compressed body itself is small')
          const r = await post(svc.app, '/echo', packed, {
            'content-type': 'application/json',
            'content-encoding': enc,
          })
          assert.equal(r.status, 413, enc)
          assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'E_HTTP_PAYLOAD_TOO_LARGE')
          const infer = zip(
            Buffer.from(
              JSON.stringify({ inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }] }) +
                ' '.repeat(4 * MAX_BODY),
            ),
          )
          assert.equal(
            (
              await post(svc.app, '/v2/models/ident/infer', infer, {
                'content-type': 'application/json',
                'content-encoding': enc,
              })
            ).status,
            413,
            `v2 ${enc}`,
          )
          const honest = await post(svc.app, '/echo', zip(Buffer.from('{"v":7}')), {
            'content-type': 'application/json',
            'content-encoding': enc,
          })
          assert.deepEqual(await honest.json(), { v: 7 })
        }
        const br = await post(svc.app, '/echo', '{"v":1}', {
          'content-type': 'application/json',
          'content-encoding': 'br',
        })
        assert.equal(br.status, 415)
        const notGzip = await post(svc.app, '/echo', '{"v":1}', {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
        })
        assert.equal(notGzip.status, 400)
      },
    )

    it(
      'multipart bodies: too many parts or a part over its limit is a 413 E_INPUT_MULTIPART_LIMIT; a proper form ' +
        'works',
      async () => {
        const form = (extra: number, docBytes: number) => {
          const f = new FormData()
          f.append('meta', '{"k":"a"}')
          f.append('doc', new Blob([new Uint8Array(docBytes)]), 'doc.bin')
          for (let i = 0; i < extra; i++) f.append(`x${i}`, '1')
          return f
        }
        const ok = await post(svc.app, '/form', form(0, 100))
        assert.deepEqual(await ok.json(), { k: 'a', size: 100 })
        for (const [f, what] of [
          [form(500, 10), /501 parts|502 parts/],
          [form(0, 4096), /"doc" is 4096 bytes; .* at most 1024/],
        ] as const) {
          const r = await post(svc.app, '/form', f)
          assert.equal(r.status, 413)
          const { error } = (await r.json()) as { error: { code: string; message: string } }
          assert.equal(error.code, 'E_INPUT_MULTIPART_LIMIT')
          assert.match(error.message, what)
        }
        // An image API taking a form wants one image, not thousands of parts.
        const many = new FormData()
        for (let i = 0; i < 100; i++) many.append(`f${i}`, '1')
        assert.equal((await post(svc.app, '/img', many)).status, 413)
      },
    )

    it(
      'multipart: a boundary the part counter could misread (over 70 characters, given twice) is refused before ' +
        'parsing',
      async () => {
        // Tiny parts behind a 201-character quoted boundary once counted as zero parts while the
        // parser still made every one of them (found in review: 5,000 parts got through).
        const raw = (boundary: string, parts: number) => {
          let text = ''
          for (let i = 0; i < parts; i++)
            text += `--${boundary}\r\nContent-Disposition: form-data; name="x${i}"\r\n\r\n1\r\n`
          return new TextEncoder().encode(`${text}--${boundary}--\r\n`)
        }
        const long = 'b'.repeat(201)
        for (const [contentType, body] of [
          [`multipart/form-data; boundary="${long}"`, raw(long, 200)],
          ['multipart/form-data; boundary=aaa; boundary=bbb', raw('bbb', 200)],
          ['multipart/form-data', raw('ccc', 3)],
        ] as const) {
          const r = await post(svc.app, '/form', body, { 'content-type': contentType })
          const { error } = (await r.json()) as { error: { code: string; message: string } }
          assert.equal(r.status, 400, `${contentType.slice(0, 60)}: ${error.message}`)
          assert.equal(error.code, 'E_INPUT_INVALID')
          assert.match(error.message, /boundary/)
        }
        // A proper boundary of the longest allowed length still works.
        const ok = 'c'.repeat(70)
        const good = raw(ok, 1)
        const r = await post(svc.app, '/img', good, { 'content-type': `multipart/form-data; boundary=${ok}` })
        assert.notEqual(r.status, 413)
        assert.notEqual(r.status, 500)
      },
    )

    it(
      'over a socket: headers past the limit get a JSON 431; a body refused by its Content-Length is answered at ' +
        'once and the connection closed',
      async () => {
        const running = await serve(
          defineService({
            name: 'h',
            apis: { echo: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }) },
          }),
          { port: 0, handleSignals: false, logger: silent, maxBodyBytes: 1024, maxHeaderBytes: 32 * 1024 },
        )
        const port = Number(new URL(running.url).port)
        const raw = (text: string) =>
          new Promise<{ out: string; ms: number }>((resolve) => {
            const started = Date.now()
            const sock = connect(port, '127.0.0.1')
            let out = ''
            sock.on('data', (d) => (out += d))
            sock.on('close', () => resolve({ out, ms: Date.now() - started }))
            sock.on('error', () => undefined)
            sock.write(text)
          })
        try {
          const big = await raw(`GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40 * 1024)}\r\n\r\n`)
          assert.match(big.out, /^HTTP\/1\.1 431 /)
          assert.match(big.out, /"code":"E_HTTP_HEADERS_TOO_LARGE"/)
          // Under the configured 32 KiB it is fine.
          assert.equal(
            (await fetch(`${running.url}/livez`, { headers: { 'x-big': 'a'.repeat(20 * 1024) } })).status,
            200,
          )
          // Claims 100 MB and sends none of it: 413 at once, then the server closes instead of reading it.
          const huge = await raw(
            'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000000\r\n\r\n',
          )
          assert.match(huge.out, /^HTTP\/1\.1 413 [\s\S]*"code":"E_HTTP_PAYLOAD_TOO_LARGE"/)
          assert.ok(huge.ms < 2_000, `closed after ${huge.ms} ms`)
        } finally {
          await running.close()
        }
      },
    )
  })
})
