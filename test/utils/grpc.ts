import { join } from 'node:path'
import { credentials, loadPackageDefinition, Metadata, type ServiceError } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'

// A gRPC client of GRPCInferenceService as a user builds one: @grpc/grpc-js with the .proto
// file the docs ship (docs/inference.proto), loaded by @grpc/proto-loader.

const PROTO = join(import.meta.dirname, '..', '..', 'docs', 'inference.proto')
export const CLIENT_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }

export interface CallOptions {
  /** grpc-timeout, in ms from now. */
  deadlineMs?: number
  key?: string
  /** More request metadata (e.g. traceparent). */
  metadata?: Record<string, string>
}

export type Grpc = ReturnType<typeof inferenceClient>

export function inferenceClient(url: string) {
  const pkg = loadPackageDefinition(loadSync(PROTO, CLIENT_OPTIONS)) as any
  const client = new pkg.inference.GRPCInferenceService(
    url.replace(/^grpc:\/\//, ''),
    credentials.createInsecure(),
    // Answers of large models run past grpc-js's default 4 MiB, as they do in production.
    { 'grpc.max_receive_message_length': -1 },
  ) as any
  const md = (o: CallOptions): Metadata => {
    const m = new Metadata()
    if (o.key) m.set('authorization', `Bearer ${o.key}`)
    for (const [k, v] of Object.entries(o.metadata ?? {})) m.set(k, v)
    return m
  }
  const deadline = (o: CallOptions) => (o.deadlineMs === undefined ? {} : { deadline: Date.now() + o.deadlineMs })
  return {
    raw: client,
    /** A unary call; rejects with the ServiceError (code, details, metadata: its trailers). */
    call<T = any>(method: string, request: object, o: CallOptions = {}): Promise<T> {
      return new Promise((resolve, reject) =>
        client[method](request, md(o), deadline(o), (err: ServiceError | null, res: T) =>
          err ? reject(err) : resolve(res),
        ),
      )
    },
    /** A ModelStreamInfer stream: write requests, read answers. */
    stream(o: CallOptions = {}) {
      return client.ModelStreamInfer(md(o), deadline(o))
    },
    close: () => client.close(),
  }
}

/** Rejects unless the promise fails with this gRPC status code; returns the error. */
export async function grpcError(p: Promise<unknown>, code: number): Promise<ServiceError> {
  try {
    await p
  } catch (err) {
    const e = err as ServiceError
    if (e.code !== code) throw new Error(`expected gRPC status ${code}, got ${e.code}: ${e.details}`)
    return e
  }
  throw new Error(`expected gRPC status ${code}, the call succeeded`)
}

export const f32 = (...v: number[]) => Buffer.from(new Float32Array(v).buffer)
export const i64 = (...v: (number | bigint)[]) => Buffer.from(new BigInt64Array(v.map(BigInt)).buffer)
export const readF32 = (b: Buffer) =>
  Array.from(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)))
export const readI64 = (b: Buffer) =>
  Array.from(new BigInt64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), Number)
