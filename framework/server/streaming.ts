import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { BundleError, ignore } from '../../errors/index.js'
import type { StreamBody } from '../io/types.js'
import { clientFacing } from './error-response.js'

/** Where a stream's chunks go: node's response (fast path) or a web ReadableStream (hono). */
export interface ChunkSink {
  /** Resolves when the chunk may be followed by the next (the client has taken the last ones). */
  write(chunk: string): Promise<void>
  end(): void
}

/** How a stream ended, as its status in metrics and the access log (the client saw 200 either way). */
export type StreamEnd = 200 | number

/**
 * One streamed answer (io.stream) from its first chunk to its end. The writer that owns the
 * socket calls pump() once; the pipeline awaits `finished`, so the request holds its
 * concurrency slot and shutdown waits for the stream. Three ways it ends early:
 * - the client goes (`cancel()`): the API method is aborted (its runner calls leave their
 *   queues) and its generator is returned, which runs its `finally`;
 * - nothing comes for `idleMs`: an E_HTTP_TIMEOUT error event, then the same;
 * - the generator throws: the error, as a client may see it, is the last chunk.
 */
export class StreamAnswer {
  readonly finished: Promise<StreamEnd>
  private settle: (status: StreamEnd) => void = () => undefined
  private cancelled = false
  private wake: (() => void) | undefined

  constructor(
    private readonly body: StreamBody,
    private readonly o: {
      idleMs: number
      /** Aborts the API method's context (its signal, its runner calls). */
      abort: (reason: Error) => void
      log: Logger
      requestId: string
      /** node's response, when there is a socket: its close before the end means the client went. */
      outgoing?: ServerResponse | undefined
      /** Runs each step of the source inside the request's runner-call context. */
      within?: <T>(fn: () => T) => T
    },
  ) {
    this.finished = new Promise((resolve) => (this.settle = resolve))
    // The client may have gone while the method ran, before this answer existed: its 'close'
    // has fired already, and would never reach the listener below.
    if (o.outgoing?.destroyed) this.cancel()
    else
      o.outgoing?.once('close', () => {
        if (!o.outgoing!.writableFinished) this.cancel()
      })
  }

  /** The client went away: stop the method and write nothing more. */
  cancel(): void {
    if (this.cancelled) return
    this.cancelled = true
    this.o.abort(new BundleError('E_HTTP_CLIENT_CLOSED', 'the client closed the connection'))
    this.wake?.()
  }

  /** Sends the chunks to `sink` as they come, until the end, a failure, the idle timeout or the client going. */
  async pump(sink: ChunkSink): Promise<void> {
    const it = this.body.chunks[Symbol.asyncIterator]()
    let status: StreamEnd = 200
    try {
      for (;;) {
        const next = await this.nextOrStop(it)
        if (next === undefined || next.done) break
        await sink.write(next.value)
        if (this.cancelled) break
      }
      if (this.cancelled) status = 499
      else sink.end()
    } catch (err) {
      if (this.cancelled) status = 499
      else {
        const e = clientFacing(err, this.o.requestId, this.o.log)
        status = e.status
        this.o.abort(e)
        try {
          await sink.write(
            this.body.failure({
              code: e.code,
              message: e.message,
              ...(e.details === undefined ? {} : { details: e.details }),
            }),
          )
          sink.end()
        } catch {
          // the client went while the error was written: nothing more to tell it
        }
      }
    } finally {
      // Runs the generator's `finally` (once its current step settles: its runner calls were
      // aborted above, so that is soon). Not awaited: a generator stuck in user code must not
      // hold the answer open.
      void Promise.resolve()
        .then(() => it.return?.())
        .catch(ignore("the stream is over: its generator's cleanup cannot reach the client any more"))
      this.settle(status)
    }
  }

  /** The next chunk, or undefined once the client went; throws E_HTTP_TIMEOUT after idleMs with none. */
  private nextOrStop(it: AsyncIterator<string>): Promise<IteratorResult<string> | undefined> {
    if (this.cancelled) return Promise.resolve(undefined)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done()
        reject(new BundleError('E_HTTP_TIMEOUT', `the stream sent nothing for ${this.o.idleMs} ms`))
      }, this.o.idleMs)
      const done = () => {
        clearTimeout(timer)
        this.wake = undefined
      }
      this.wake = () => {
        done()
        resolve(undefined)
      }
      const step = this.o.within ? this.o.within(() => it.next()) : it.next()
      step.then(
        (r) => {
          done()
          resolve(r)
        },
        (err: unknown) => {
          done()
          reject(err)
        },
      )
    })
  }
}

/**
 * A sink on node's response: each chunk written as it comes, waiting for the socket to drain.
 * A response already destroyed takes nothing: `gone` stops the stream.
 */
export function nodeSink(res: ServerResponse, gone: () => void): ChunkSink {
  return {
    write: (chunk) => {
      if (res.destroyed) {
        gone()
        return Promise.resolve()
      }
      return res.write(chunk)
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const go = () => {
              res.off('drain', go).off('close', go)
              resolve()
            }
            res.on('drain', go).on('close', go)
          })
    },
    end: () => {
      if (!res.destroyed) res.end()
    },
  }
}

/** The stream as a web ReadableStream (hono's routes, app.request() in tests); pulled as the reader reads. */
export function readableOf(answer: StreamAnswer): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  let more: (() => void) | undefined
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        void answer.pump({
          write: async (chunk) => {
            controller.enqueue(encoder.encode(chunk))
            if ((controller.desiredSize ?? 1) <= 0) await new Promise<void>((resolve) => (more = resolve))
          },
          end: () => controller.close(),
        })
      },
      pull() {
        more?.()
        more = undefined
      },
      cancel() {
        answer.cancel()
        more?.()
      },
    },
    { highWaterMark: 4 },
  )
}
