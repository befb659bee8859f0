import {
  credentials,
  loadPackageDefinition,
  Metadata,
  type ServiceClientConstructor,
  type ServiceError,
} from '@grpc/grpc-js'
import { inferencePackage } from '../../server/grpc/definition.js'

/** The GRPCInferenceService client class, from the same protocol text the server serves. */
function inferenceClientClass(): ServiceClientConstructor {
  const pkg = loadPackageDefinition(inferencePackage()) as unknown as {
    inference: { GRPCInferenceService: ServiceClientConstructor }
  }
  return pkg.inference.GRPCInferenceService
}

export interface InferenceClient {
  /** One unary call with a deadline `ms` from now; rejects with the ServiceError. */
  call<T>(method: string, request: object, ms: number): Promise<T>
  /** The raw method, for the hot path (ModelInfer under load): no promise wrapper of ours per call. */
  raw: Record<
    string,
    (req: object, md: Metadata, opts: { deadline: number }, cb: (e: ServiceError | null, r: any) => void) => void
  >
  metadata: Metadata
  close(): void
}

/** A client of GRPCInferenceService at `target` (host:port), sending the key when given. */
export function inferenceClient(target: string, key?: string, options: Record<string, number> = {}): InferenceClient {
  const Client = inferenceClientClass()
  const client = new Client(target, credentials.createInsecure(), options) as unknown as InferenceClient['raw'] & {
    close(): void
  }
  const metadata = new Metadata()
  if (key) metadata.set('authorization', `Bearer ${key}`)
  return {
    call: (method, request, ms) =>
      new Promise((resolve, reject) =>
        client[method]!(request, metadata, { deadline: Date.now() + ms }, (e, r) => (e ? reject(e) : resolve(r))),
      ),
    raw: client,
    metadata,
    close: () => client.close(),
  }
}
