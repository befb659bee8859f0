import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import protobuf from 'protobufjs'

/** A caller's span context, as a W3C traceparent header and its ids (sampled). */
export function newTraceparent(): { traceId: string; spanId: string; header: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` }
}

/** A span as the receiver got it, whichever encoding it came in. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number
  /** Epoch milliseconds (from the nanoseconds sent). */
  start: number
  end: number
  attributes: Record<string, unknown>
  links: { traceId: string; spanId: string }[]
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string }
  /** The exporting process's resource attributes (service.name, bundle.process, process.pid …). */
  resource: Record<string, unknown>
  /** How it arrived: application/x-protobuf or application/json. */
  encoding: 'protobuf' | 'json'
}

const root = protobuf.loadSync(fileURLToPath(new URL('../fixtures/otlp/trace.proto', import.meta.url)))
const Request = root.lookupType('otlp.ExportTraceServiceRequest')

type Any = Record<string, unknown>

const hex = (v: unknown): string =>
  v instanceof Uint8Array ? Buffer.from(v).toString('hex') : typeof v === 'string' ? v.toLowerCase() : ''

function value(v: Any | undefined): unknown {
  if (v === undefined || v === null) return undefined
  if ('stringValue' in v) return v.stringValue
  if ('boolValue' in v) return v.boolValue
  if ('intValue' in v) return Number(v.intValue)
  if ('doubleValue' in v) return Number(v.doubleValue)
  if ('arrayValue' in v) return ((v.arrayValue as Any).values as Any[] | undefined)?.map(value) ?? []
  return undefined
}

const attrs = (list: unknown): Record<string, unknown> =>
  Object.fromEntries(((list as Any[] | undefined) ?? []).map((kv) => [kv.key as string, value(kv.value as Any)]))

/** OTLP/JSON sends nanoseconds as strings (or numbers); protobuf as fixed64 (a string here). */
const ms = (ns: unknown): number => Number(BigInt(String(ns ?? 0)) / 1000n) / 1000

function spansOf(body: Any, encoding: ReceivedSpan['encoding']): ReceivedSpan[] {
  const out: ReceivedSpan[] = []
  for (const rs of (body.resourceSpans as Any[] | undefined) ?? []) {
    const resource = attrs((rs.resource as Any | undefined)?.attributes)
    for (const ss of (rs.scopeSpans as Any[] | undefined) ?? []) {
      for (const s of (ss.spans as Any[] | undefined) ?? []) {
        const status = (s.status as Any | undefined) ?? {}
        out.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name as string,
          kind: Number(s.kind ?? 0),
          start: ms(s.startTimeUnixNano),
          end: ms(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          links: ((s.links as Any[] | undefined) ?? []).map((l) => ({
            traceId: hex(l.traceId),
            spanId: hex(l.spanId),
          })),
          status: { code: Number(status.code ?? 0), message: (status.message as string | undefined) ?? '' },
          resource,
          encoding,
        })
      }
    }
  }
  return out
}

/**
 * A real OTLP/HTTP trace receiver for tests: POST /v1/traces in application/x-protobuf (decoded
 * with the published schema's field numbers, test/fixtures/otlp/trace.proto) or application/json,
 * answered 200 as a collector would. It keeps every span; `waitFor` resolves when a predicate
 * holds over them (event-driven, no polling sleeps).
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  /** Export requests by encoding. */
  readonly requests = { protobuf: 0, json: 0 }
  /** Bytes of export bodies received. */
  bytes = 0
  private waiters: { test: (s: ReceivedSpan[]) => boolean; resolve: () => void }[] = []
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /**
   * `decode: false`: bodies are counted (requests, bytes) and dropped, as a collector on another
   * machine would cost the server nothing to decode (benchmarks on a small machine).
   */
  static async start(o: { decode?: boolean } = {}): Promise<OtlpReceiver> {
    let self: OtlpReceiver | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end()
          return
        }
        const body = Buffer.concat(chunks)
        const type = req.headers['content-type'] ?? ''
        self!.bytes += body.byteLength
        if (o.decode === false) {
          self!.requests[type.startsWith('application/json') ? 'json' : 'protobuf']++
          res.writeHead(200).end()
          return
        }
        try {
          if (type.startsWith('application/x-protobuf')) {
            const msg = Request.toObject(Request.decode(body), { longs: String, defaults: false }) as Any
            self!.add(spansOf(msg, 'protobuf'), 'protobuf')
            res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
          } else if (type.startsWith('application/json')) {
            self!.add(spansOf(JSON.parse(body.toString('utf8')) as Any, 'json'), 'json')
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
          } else res.writeHead(415).end()
        } catch (err) {
          res.writeHead(400).end(String(err))
        }
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    self = new OtlpReceiver(server, `http://127.0.0.1:${port}`)
    return self
  }

  private add(spans: ReceivedSpan[], encoding: ReceivedSpan['encoding']): void {
    this.requests[encoding]++
    this.spans.push(...spans)
    this.waiters = this.waiters.filter((w) => {
      if (!w.test(this.spans)) return true
      w.resolve()
      return false
    })
  }

  /** Resolves once `test` holds over the spans received (checked now and on each export). */
  waitFor(test: (spans: ReceivedSpan[]) => boolean, what: string, timeoutMs = 30_000): Promise<void> {
    if (test(this.spans)) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const names = this.spans.map((s) => s.name).join(', ')
        reject(new Error(`no ${what} within ${timeoutMs} ms; received: ${names || 'nothing'}`))
      }, timeoutMs)
      this.waiters.push({
        test,
        resolve: () => {
          clearTimeout(timer)
          resolve()
        },
      })
    })
  }

  /** Spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId)
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
