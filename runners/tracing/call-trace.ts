import {
  type Attributes,
  context,
  type Link,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api'
import { carrierOf, contextOf, recordingSpan, type TraceCarrier } from './carrier.js'
import { activeTracer } from './state.js'

/** A span's end: failed with `err`, or fine. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message ?? String(err) })
    const code = (err as { code?: unknown })?.code
    if (typeof code === 'string') span.setAttribute('error.type', code)
  }
  span.end()
}

/**
 * Links from a batch span to the other requests in its batch, at most: each of n traced requests
 * links to the others, so a batch costs n² links without a cap (bundle.batch.requests still
 * counts them all).
 */
export const MAX_LINKS = 32

/** One batch a traced request's rows went into: what its worker joins its span to, and its end. */
export interface TracedPart {
  readonly carrier: TraceCarrier
  end(err?: unknown): void
}

/**
 * The spans of one runner call inside a traced request: the call itself (submit to answer), the
 * `queue` wait until its rows go into a batch, and each `batch` they join — its size, and links
 * to the other requests that shared it. The worker's `execute` span is a child of the batch
 * (its context crosses over in the run message). Made only while the request's span records:
 * tracing off or the request not sampled costs one check.
 */
export class CallTrace {
  private queue: Span | undefined
  private readonly ctx

  private constructor(
    private readonly tracer: Tracer,
    readonly span: Span,
  ) {
    this.ctx = trace.setSpan(context.active(), span)
    this.queue = tracer.startSpan('queue', { kind: SpanKind.INTERNAL }, this.ctx)
  }

  /** A call's spans, if the request it serves is traced (else undefined: nothing is made). */
  static start(runner: string, method: string, rows: number): CallTrace | undefined {
    const tracer = activeTracer()
    if (tracer === undefined || recordingSpan() === undefined) return undefined
    const span = tracer.startSpan(`${runner}.${method}`, {
      kind: SpanKind.INTERNAL,
      attributes: { 'bundle.runner': runner, 'bundle.runner.method': method, 'bundle.rows': rows },
    })
    return new CallTrace(tracer, span)
  }

  /**
   * `rows` of this call go into a batch of `batchRows` rows from `peers.length` requests (this
   * one among them): the queue wait ends, a batch span begins, linked to the other traced requests.
   */
  joined(rows: number, batchRows: number, peers: readonly (CallTrace | undefined)[]): TracedPart {
    this.queue?.end()
    this.queue = undefined
    const links: Link[] = []
    for (const p of peers) {
      if (links.length === MAX_LINKS) break
      if (p !== undefined && p !== this) links.push({ context: p.span.spanContext() })
    }
    const span = this.tracer.startSpan(
      'batch',
      {
        kind: SpanKind.INTERNAL,
        attributes: { 'bundle.batch.size': batchRows, 'bundle.batch.requests': peers.length, 'bundle.rows': rows },
        links,
      },
      this.ctx,
    )
    return { carrier: carrierOf(span), end: (err) => endSpan(span, err) }
  }

  /** The call answered (or failed: refused, shed, its client gone, the batch failed). */
  end(err?: unknown): void {
    if (this.queue) endSpan(this.queue, err)
    this.queue = undefined
    endSpan(this.span, err)
  }
}

/** `p`, ending `t` when it settles (failed or not); `p` itself when the call is not traced. */
export function traced<T>(t: CallTrace | undefined, p: Promise<T>): Promise<T> {
  if (t === undefined) return p
  return p.then(
    (v) => {
      t.end()
      return v
    },
    (err: unknown) => {
      t.end(err)
      throw err
    },
  )
}

/** A span around a piece of a traced request, and the way to run that piece inside it. */
export interface SpanScope {
  readonly span: Span
  /** Runs `fn` with the span active, ending it (failed, if `fn` fails) when `fn` settles. */
  run<T>(fn: () => Promise<T>): Promise<T>
}

/**
 * A span around a piece of a traced request (an ensemble step, a task run, a custom runner's
 * unbatched call); undefined when tracing is off or, without `parent`, when no recording span is
 * active. `describe` names it, called only when there is one. `parent`: a carrier the span
 * continues (a task submitted by a traced request).
 */
export function spanAround(
  describe: () => { name: string; attributes: Attributes },
  o: { parent?: TraceCarrier | undefined; kind?: SpanKind } = {},
): SpanScope | undefined {
  const tracer = activeTracer()
  if (tracer === undefined) return undefined
  const parent = o.parent ? contextOf(o.parent) : recordingSpan() ? context.active() : undefined
  if (parent === undefined) return undefined
  const { name, attributes } = describe()
  const span = tracer.startSpan(name, { kind: o.kind ?? SpanKind.INTERNAL, attributes }, parent)
  const ctx = trace.setSpan(parent, span)
  return {
    span,
    run: (fn) =>
      context.with(ctx, fn).then(
        (v) => {
          endSpan(span)
          return v
        },
        (err: unknown) => {
          endSpan(span, err)
          throw err
        },
      ),
  }
}
