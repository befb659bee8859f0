import { Agent, request } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { status as Status } from '@grpc/grpc-js'
import { RETRYABLE_CODES, type ErrorCode } from '../../../errors/index.js'
import type { Outcome } from './stats.js'
import type { Payload, TensorInput } from './inputs.js'
import { inferenceClient } from './grpc-client.js'

// The three kinds of target bundle bench loads: a service's own API over HTTP, a model over the
// Open Inference Protocol's HTTP binary form, and a model over gRPC. Each sender never rejects:
// a failure is an outcome with its code (the server's E_* code when it sent one).

export interface Target {
  send(): Promise<Outcome>
  close(): void
}

const refusedCode = (code: string) => RETRYABLE_CODES.has(code as ErrorCode)

/** How long a request may take before it counts as an error (`TIMEOUT`): a hung server cannot hang a run. */
export const REQUEST_TIMEOUT_MS = 30_000

/** The server's message in an error body: `{"error": {"code", "message"}}` or /v2's `{"error": "…"}`. */
function errorOf(body: string): { code?: string; message?: string } {
  try {
    const e = (JSON.parse(body) as { error?: { code?: string; message?: string } | string }).error
    return typeof e === 'string'
      ? { message: e }
      : { ...(e?.code ? { code: e.code } : {}), ...(e?.message ? { message: e.message } : {}) }
  } catch {
    return body ? { message: body.slice(0, 200) } : {}
  }
}

/** A keep-alive HTTP client for `base` (one socket per concurrent request, as wrk keeps). */
function http(base: URL, sockets: number, timeoutMs: number) {
  const tls = base.protocol === 'https:'
  const agent = tls
    ? new HttpsAgent({ keepAlive: true, maxSockets: sockets })
    : new Agent({ keepAlive: true, maxSockets: sockets })
  const send = tls ? httpsRequest : request
  const post = (path: string, headers: Record<string, string>, body: Uint8Array): Promise<Outcome> =>
    new Promise((resolve) => {
      const req = send(
        new URL(path, base),
        { method: 'POST', agent, headers: { ...headers, 'content-length': String(body.byteLength) } },
        (res) => {
          const status = res.statusCode ?? 0
          const ok = status >= 200 && status < 300
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => {
            if (!ok && chunks.length < 16) chunks.push(c)
          })
          res.on('end', () => {
            if (ok) return resolve({ ok, code: String(status) })
            const e = errorOf(Buffer.concat(chunks).toString('utf8'))
            const code = e.code ?? String(status)
            resolve({
              ok,
              code,
              refused: refusedCode(code) || status === 429 || status === 503,
              ...(e.message ? { message: e.message } : {}),
            })
          })
          res.on('error', (e) => resolve({ ok: false, code: (e as NodeJS.ErrnoException).code ?? 'ERR_RESPONSE' }))
        },
      )
      req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })))
      req.on('error', (e) =>
        resolve({ ok: false, code: (e as NodeJS.ErrnoException).code ?? 'ERR_REQUEST', message: e.message }),
      )
      req.end(body)
    })
  return { post, close: () => agent.destroy() }
}

const auth = (key: string | undefined): Record<string, string> => (key ? { authorization: `Bearer ${key}` } : {})

/** A service API: each request posts the next payload (files in turn, or the one tensor). */
export function apiTarget(
  base: URL,
  path: string,
  payloads: Payload[],
  o: { key?: string; sockets: number; timeoutMs?: number },
): Target {
  const client = http(base, o.sockets, o.timeoutMs ?? REQUEST_TIMEOUT_MS)
  let next = 0
  return {
    send() {
      const p = payloads[next++ % payloads.length]!
      return client.post(path, { ...auth(o.key), ...p.headers }, p.body)
    },
    close: client.close,
  }
}

/** A model over /v2 with binary tensor data (what Triton's HTTP client sends); outputs come back binary. */
export function v2Target(
  base: URL,
  model: string,
  inputs: TensorInput[],
  o: { key?: string; sockets: number; version?: string; timeoutMs?: number },
): Target {
  const client = http(base, o.sockets, o.timeoutMs ?? REQUEST_TIMEOUT_MS)
  const header = Buffer.from(
    JSON.stringify({
      inputs: inputs.map((i) => ({
        name: i.name,
        shape: i.shape,
        datatype: i.datatype,
        parameters: { binary_data_size: i.bytes.byteLength },
      })),
      parameters: { binary_data_output: true },
    }),
  )
  const body = Buffer.concat([header, ...inputs.map((i) => i.bytes)])
  const versioned = o.version ? `/versions/${encodeURIComponent(o.version)}` : ''
  const path = `/v2/models/${encodeURIComponent(model)}${versioned}/infer`
  const headers = { ...auth(o.key), 'inference-header-content-length': String(header.byteLength) }
  return { send: () => client.post(path, headers, body), close: client.close }
}

/** A model over gRPC ModelInfer with raw_input_contents (what Triton's gRPC clients send). */
export function grpcTarget(
  target: string,
  model: string,
  inputs: TensorInput[],
  o: { key?: string; version?: string; timeoutMs?: number },
): Target {
  const client = inferenceClient(target, o.key, {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  })
  const modelInfer = client.raw.ModelInfer!.bind(client.raw)
  const req = {
    model_name: model,
    model_version: o.version ?? '',
    inputs: inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape })),
    raw_input_contents: inputs.map((i) => i.bytes),
  }
  return {
    send: () =>
      new Promise((resolve) =>
        modelInfer(req, client.metadata, { deadline: Date.now() + (o.timeoutMs ?? REQUEST_TIMEOUT_MS) }, (err) => {
          if (err === null) return resolve({ ok: true, code: 'OK' })
          // The server's refusals carry their code; an UNAVAILABLE without one is the connection failing.
          const trailer = err.metadata?.get('error-code')[0]
          const code = String(trailer ?? Status[err.code] ?? err.code)
          resolve({ ok: false, code, refused: trailer !== undefined && refusedCode(code), message: err.details })
        }),
      ),
    close: () => client.close(),
  }
}
