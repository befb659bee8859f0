import type { Context, Hono } from 'hono'
import { BundleError } from '../../../errors/index.js'
import { isConnectionError } from '../../../runners/index.js'
import type { ApiDefinition } from '../../service/definition.js'
import type { TaskService } from './queue.js'

/** What the routes borrow from the app: its input decoding (readiness included) and its error answers. */
export interface TaskRouteHooks {
  decode: (c: Context, a: ApiDefinition) => Promise<unknown>
  respond: (c: Context, err: unknown) => Response
}

/**
 * The routes of every task API: submit, status, result, cancel, retry (the app checks the API key before them: none is
 * open).
 */
export function mountTaskRoutes(app: Hono<any>, tasks: TaskService, h: TaskRouteHooks): void {
  const taskId = (c: Context): string => {
    const id = c.req.query('taskId')
    if (!id) throw new BundleError('E_INPUT_INVALID', 'taskId is missing: add ?taskId=… (the id submit returned)')
    if (!/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new BundleError('E_TASK_NOT_FOUND', `no task ${id.slice(0, 64)}`)
    return id
  }
  const route = (fn: (c: Context) => Promise<Response>) => async (c: Context) => {
    try {
      return await fn(c)
    } catch (err) {
      // Redis dropping the connection under a call is not the server's fault: a retryable 503.
      const answer = isConnectionError(err)
        ? new BundleError('E_REMOTE_UNAVAILABLE', 'Redis failed while handling the task; retry shortly', { cause: err })
        : err
      return h.respond(c, answer)
    }
  }
  for (const a of tasks.apis) {
    app.post(
      `${a.route}/submit`,
      route(async (c) => {
        // A caller's trace context goes with the task: its run joins the caller's trace.
        const traceparent = c.req.header('traceparent')
        const tracestate = c.req.header('tracestate')
        const trace = traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : undefined
        const id = await tasks.submit(a, await h.decode(c, a), trace)
        return c.json({ taskId: id, status: 'pending' }, 202)
      }),
    )
    app.get(
      `${a.route}/status`,
      route(async (c) => {
        return c.json(await tasks.status(a, taskId(c)))
      }),
    )
    app.get(
      `${a.route}/result`,
      route(async (c) => {
        const r = await tasks.result(a, taskId(c))
        return c.body(Buffer.from(r.body, 'base64') as never, 200, {
          'content-type': r.contentType,
          ...(r.headers ?? {}),
        })
      }),
    )
    app.post(
      `${a.route}/cancel`,
      route(async (c) => {
        const id = taskId(c)
        await tasks.cancel(a, id)
        return c.json({ taskId: id, status: 'cancelled' })
      }),
    )
    app.post(
      `${a.route}/retry`,
      route(async (c) => {
        const id = taskId(c)
        await tasks.retry(a, id)
        return c.json({ taskId: id, status: 'pending' })
      }),
    )
  }
}
