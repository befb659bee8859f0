import { randomUUID } from 'node:crypto'
import type {
  Metadata,
  sendUnaryData,
  ServerDuplexStream,
  ServerUnaryCall,
  UntypedServiceImplementation,
} from '@grpc/grpc-js'
import { status as Status } from '@grpc/grpc-js'
import { BundleError } from '../../../errors/index.js'
import type { InferenceModel } from '../../../runners/index.js'
import { withServerSpan } from '../request-span.js'
import { SANE_REQUEST_ID } from '../request.js'
import { requestDeadline, runInference } from '../v2/infer.js'
import { config, loadParameters, metadata, stats } from '../v2/models.js'
import { forStatistics } from '../v2/model-errors.js'
import type { V2Options } from '../v2/routes.js'
import type { GrpcMetrics } from './metrics.js'
import { GRPC_ROUTES } from './route-list.js'
import { toServiceError } from './status.js'
import { parameterValue, parseWireRequest, wireResponse, type WireInferRequest, type WireParameter } from './tensors.js'

export interface GrpcServiceOptions extends V2Options {
  /** Checks the `authorization` metadata (`Bearer <key>`) when the server has a key. */
  checkKey?: (authorization: string | undefined) => void
  metrics: GrpcMetrics
}

const EXTENSIONS = ['binary_tensor_data', 'model_configuration', 'model_repository', 'statistics', 'streaming']

/** A method's access, from the route list (a name it does not list is a bug: keyed, to fail closed). */
const accessOf = (rpc: string) => GRPC_ROUTES.find((r) => r.path === rpc)?.access ?? 'keyed'

type Unary = (call: ServerUnaryCall<any, any>, callback: sendUnaryData<any>) => void

const first = (md: Metadata, key: string): string | undefined => {
  const v = md.get(key)[0]
  return v === undefined ? undefined : String(v)
}

const requestIdOf = (md: Metadata): string => {
  const given = first(md, 'x-request-id')
  return given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
}

/** The client's deadline (grpc-timeout) on performance.now()'s clock, if it set one. */
function deadlineOf(call: { getDeadline(): Date | number }): number | undefined {
  const d = call.getDeadline()
  const at = d instanceof Date ? d.getTime() : d
  return Number.isFinite(at) ? performance.now() + (at - Date.now()) : undefined
}

/** What a request's refusal for time is judged by: its own deadline, when it came, its model. */
interface Deadline {
  at?: number
  arrived?: number
  model?: InferenceModel
}

/**
 * Whether the client's deadline was the one the batcher went by (shorter than the runner's own
 * queue-policy timeout): then a refusal for time is the client's DEADLINE_EXCEEDED, not an
 * overload. Asked only when a request fails, so the model's configuration is not built per request.
 */
function clientBound(d: Deadline): boolean {
  if (d.at === undefined || d.arrived === undefined || d.model === undefined) return false
  const policy = (
    d.model.config().dynamic_batching as { default_queue_policy?: { default_timeout_microseconds?: number } }
  )?.default_queue_policy
  const us = policy?.default_timeout_microseconds
  return !(typeof us === 'number' && us > 0) || d.at < d.arrived + us / 1000
}

/** Triton's model configuration as its ModelConfig message: the v2 JSON, with our extras as parameters. */
function wireConfig(m: InferenceModel): Record<string, unknown> {
  const { model, digest, ...rest } = config(m) as Record<string, unknown>
  const parameters: Record<string, { string_value: string }> = {}
  if (typeof model === 'string') parameters.model = { string_value: model }
  if (typeof digest === 'string') parameters.digest = { string_value: digest }
  return { ...rest, parameters }
}

/** A repository parameter map as loadParameters reads it (`config` may come as text or bytes). */
function repositoryParameters(p: Record<string, WireParameter>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(p)) {
    const value = parameterValue(v)
    out[k] = Buffer.isBuffer(value) ? value.toString('utf8') : value
  }
  return out
}

/**
 * The handlers of GRPCInferenceService: the same repository, readiness, checks, runners and
 * statistics as /v2 over HTTP (routes.ts). Health, metadata, configuration and statistics are
 * open, as over HTTP; inference and the repository need the key when the server has one.
 */
export function inferenceHandlers(o: GrpcServiceOptions): {
  handlers: UntypedServiceImplementation
  /** Shutdown: streams end once their requests are answered (idle ones now). */
  drain(): void
} {
  const service = new GrpcInference(o)
  return { handlers: service.handlers(), drain: () => service.drain() }
}

type Call = { getDeadline(): Date | number; cancelled: boolean; metadata: Metadata }

/** The service's state (open streams, draining) and its RPCs as methods. */
class GrpcInference {
  /** Each open stream's "end me if I am done" check. */
  private readonly streams = new Set<() => void>()
  private draining = false

  constructor(private readonly o: GrpcServiceOptions) {}

  drain(): void {
    this.draining = true
    for (const end of this.streams) end()
  }

  /** A unary RPC: the key checked where route-list.ts says keyed, errors as statuses, a metrics sample a call. */
  private unary(rpc: string, fn: (req: any, call: ServerUnaryCall<any, any>, bound: Deadline) => unknown): Unary {
    const o = this.o
    const closed = accessOf(rpc) === 'keyed'
    return (call, callback) => {
      const started = performance.now()
      const requestId = requestIdOf(call.metadata)
      const bound: Deadline = {}
      const finish = (err: unknown, value?: unknown) => {
        if (err === undefined) {
          o.metrics.done(rpc, Status.OK, (performance.now() - started) / 1e3)
          return callback(null, value)
        }
        const e = toServiceError(err, requestId, o.log, clientBound(bound))
        o.metrics.done(rpc, e.code, (performance.now() - started) / 1e3)
        callback(e)
      }
      try {
        if (closed) o.checkKey?.(first(call.metadata, 'authorization'))
        Promise.resolve(fn(call.request, call, bound)).then(
          (v) => finish(undefined, v),
          (err) => finish(err),
        )
      } catch (err) {
        finish(err)
      }
    }
  }

  private find(name: string, version: string): InferenceModel {
    if (!name) throw new BundleError('E_INPUT_INVALID', 'the request needs a model name')
    return this.o.repository.find(name, version || undefined)
  }

  /**
   * One inference, as ModelInfer and each request of ModelStreamInfer run it. It fills in
   * `bound` with its deadline, so a failure can tell a missed client deadline from an overload.
   */
  private infer(msg: WireInferRequest, call: Call, bound: Deadline, rpc: 'ModelInfer' | 'ModelStreamInfer') {
    const arrived = performance.now()
    const m = this.find(msg.model_name, msg.model_version)
    if (!this.o.ready() || !m.ready()) throw new BundleError('E_HTTP_NOT_READY', `model "${m.name}" is not ready`)
    return this.o.track(
      () =>
        withServerSpan(
          () => ({
            name: `inference.GRPCInferenceService/${rpc}`,
            attributes: {
              'rpc.system': 'grpc',
              'rpc.service': 'inference.GRPCInferenceService',
              'rpc.method': rpc,
              'bundle.model': m.name,
            },
          }),
          (name) => first(call.metadata, name),
          () => this.run(msg, call, bound, m, arrived),
        ),
      () => m.expectCall?.(),
    )
  }

  private async run(msg: WireInferRequest, call: Call, bound: Deadline, m: InferenceModel, arrived: number) {
    const req = parseWireRequest(msg)
    const given = deadlineOf(call)
    const deadline = requestDeadline(req.timeoutMs, arrived, given)
    if (deadline !== undefined) Object.assign(bound, { at: deadline, arrived, model: m })
    const { model, outputs } = await runInference(req, {
      model: m,
      resolve: () => this.find(msg.model_name, ''),
      versioned: msg.model_version !== '',
      arrived,
      ...(given !== undefined ? { deadline: given } : {}),
      gone: () => call.cancelled,
    })
    return wireResponse(model, req.id, outputs)
  }

  /** ModelStreamInfer: requests answered as they finish, a failed one answered in-stream; ends once all are. */
  private stream(call: ServerDuplexStream<WireInferRequest, unknown>): void {
    const streamId = requestIdOf(call.metadata)
    try {
      if (accessOf('ModelStreamInfer') === 'keyed') this.o.checkKey?.(first(call.metadata, 'authorization'))
    } catch (err) {
      this.o.metrics.done('ModelStreamInfer', Status.UNAUTHENTICATED, 0)
      call.emit('error', toServiceError(err, streamId, this.o.log))
      return
    }
    this.o.metrics.streamOpened()
    let pending = 0
    let ended = false
    const maybeEnd = () => {
      if ((ended || this.draining) && pending === 0 && !call.cancelled && !call.writableEnded) {
        // Requests the client sent after this point are not read: none is run without its answer.
        call.pause()
        call.end()
      }
    }
    this.streams.add(maybeEnd)
    call.on('data', (msg: WireInferRequest) => {
      if (call.writableEnded) return
      pending++
      void this.streamRequest(call, streamId, msg).finally(() => {
        pending--
        maybeEnd()
      })
    })
    call.on('end', () => {
      ended = true
      maybeEnd()
    })
    call.once('close', () => {
      this.streams.delete(maybeEnd)
      this.o.metrics.streamClosed()
    })
    call.on('error', () => undefined) // a client gone mid-stream: its requests see call.cancelled
  }

  /** One request of a stream, its answer (or its failure) written to the stream. */
  private async streamRequest(
    call: ServerDuplexStream<WireInferRequest, unknown>,
    streamId: string,
    msg: WireInferRequest,
  ): Promise<void> {
    const started = performance.now()
    const bound: Deadline = {}
    const requestId = msg.id && SANE_REQUEST_ID.test(msg.id) ? `${streamId}/${msg.id}` : randomUUID()
    try {
      const response = await this.infer(msg, call, bound, 'ModelStreamInfer')
      this.o.metrics.done('ModelStreamInfer', Status.OK, (performance.now() - started) / 1e3)
      if (!call.cancelled) call.write({ error_message: '', infer_response: response })
    } catch (err) {
      // The request fails; the stream goes on. Its id, its code and its gRPC status name
      // travel with the message, so a client matches the failure to its request.
      const e = toServiceError(err, requestId, this.o.log, clientBound(bound))
      this.o.metrics.done('ModelStreamInfer', e.code, (performance.now() - started) / 1e3)
      if (call.cancelled) return
      call.write({
        error_message: e.details,
        infer_response: {
          model_name: msg.model_name,
          model_version: msg.model_version,
          id: msg.id,
          parameters: {
            error_code: { string_param: String(e.metadata?.get('error-code')[0] ?? '') },
            grpc_status: { string_param: Status[e.code] },
          },
        },
      })
    }
  }

  handlers(): UntypedServiceImplementation {
    const o = this.o
    const find = (name: string, version: string) => this.find(name, version)
    return {
      ServerLive: this.unary('ServerLive', () => ({ live: true })),
      ServerReady: this.unary('ServerReady', () => ({ ready: o.ready() })),
      // A known model that is not loaded is OK with ready: false; only a name nobody knows is NOT_FOUND.
      ModelReady: this.unary('ModelReady', (r) => {
        if (!r.name) throw new BundleError('E_INPUT_INVALID', 'the request needs a model name')
        return { ready: o.repository.isReady(r.name, r.version || undefined) }
      }),
      ServerMetadata: this.unary('ServerMetadata', () => ({
        name: 'modelbundle',
        version: o.version,
        extensions: EXTENSIONS,
      })),
      ModelMetadata: this.unary('ModelMetadata', (r) =>
        metadata(find(r.name, r.version), o.repository.versions(r.name)),
      ),
      ModelConfig: this.unary('ModelConfig', (r) => ({ config: wireConfig(find(r.name, r.version)) })),
      ModelStatistics: this.unary('ModelStatistics', (r) => ({
        model_stats: r.name
          ? [forStatistics(r.name, () => stats(find(r.name, r.version)))]
          : o.repository.models().map(stats),
      })),
      ModelInfer: this.unary('ModelInfer', (r, call, bound) => this.infer(r, call, bound, 'ModelInfer')),
      ModelStreamInfer: ((call: ServerDuplexStream<WireInferRequest, unknown>) => this.stream(call)) as never,
      ...this.repositoryHandlers(),
    }
  }

  /** The repository extension: index, load, unload (the key needed when the server has one). */
  private repositoryHandlers(): UntypedServiceImplementation {
    const o = this.o
    return {
      RepositoryIndex: this.unary('RepositoryIndex', (r) => ({
        models: o.repository.index().filter((m) => !r.ready || m.state === 'READY'),
      })),
      RepositoryModelLoad: this.unary('RepositoryModelLoad', async (r) => {
        if (!r.model_name) throw new BundleError('E_INPUT_INVALID', 'the request needs a model_name')
        await o.repository.load(r.model_name, loadParameters(repositoryParameters(r.parameters)))
        return {}
      }),
      RepositoryModelUnload: this.unary('RepositoryModelUnload', async (r) => {
        if (!r.model_name) throw new BundleError('E_INPUT_INVALID', 'the request needs a model_name')
        const version = parameterValue(r.parameters.version)
        await o.repository.unload(r.model_name, typeof version === 'string' && version ? version : undefined)
        return {}
      }),
    }
  }
}
