import type { Context } from 'hono'
import { BundleError } from '../../../errors/index.js'
import { isConnectionError } from '../../../runners/index.js'
import type { ApiDefinition } from '../../service/definition.js'
import { route, type RouteSpec } from '../../route-spec.js'
import { bind, type ServerPart } from '../part.js'
import type { TaskService } from './queue.js'

/** What the routes borrow from the app: its input decoding (readiness included) and its error answers. */
export interface TaskRouteHooks {
  decode: (c: Context, a: ApiDefinition) => Promise<unknown>
  respond: (c: Context, err: unknown) => Response
}

/** A task API's five routes, all keyed (the app checks the API key before them). */
export function taskRoutes(a: { name: string; route: string }): RouteSpec[] {
  return [
    route('POST', `${a.route}/submit`, 'keyed', 'task', `${a.name}: submit a task`),
    route('GET', `${a.route}/status`, 'keyed', 'task', `${a.name}: a task's state`),
    route('GET', `${a.route}/result`, 'keyed', 'task', `${a.name}: a finished task's output`),
    route('POST', `${a.route}/cancel`, 'keyed', 'task', `${a.name}: cancel a task`),
    route('POST', `${a.route}/retry`, 'keyed', 'task', `${a.name}: retry a task`),
  ]
}

const taskId = (c: Context): string => {
  const id = c.req.query('taskId')
  if (!id) throw new BundleError('E_INPUT_INVALID', 'taskId is missing: add ?taskId=… (the id submit returned)')
  if (!/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new BundleError('E_TASK_NOT_FOUND', `no task ${id.slice(0, 64)}`)
  return id
}

/** The routes of every task API: submit, status, result, cancel, retry. */
export function taskPart(tasks: TaskService, h: TaskRouteHooks): ServerPart {
  const guarded = (fn: (c: Context) => Promise<Response>) => async (c: Context) => {
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
  const routes = tasks.apis.flatMap((a) =>
    bind(taskRoutes(a), {
      [`POST ${a.route}/submit`]: guarded(async (c) => {
        // A caller's trace context goes with the task: its run joins the caller's trace.
        const traceparent = c.req.header('traceparent')
        const tracestate = c.req.header('tracestate')
        const trace = traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : undefined
        const id = await tasks.submit(a, await h.decode(c, a), trace)
        return c.json({ taskId: id, status: 'pending' }, 202)
      }),
      [`GET ${a.route}/status`]: guarded(async (c) => c.json(await tasks.status(a, taskId(c)))),
      [`GET ${a.route}/result`]: guarded(async (c) => {
        const r = await tasks.result(a, taskId(c))
        return c.body(Buffer.from(r.body, 'base64') as never, 200, {
          'content-type': r.contentType,
          ...(r.headers ?? {}),
        })
      }),
      [`POST ${a.route}/cancel`]: guarded(async (c) => {
        const id = taskId(c)
        await tasks.cancel(a, id)
        return c.json({ taskId: id, status: 'cancelled' })
      }),
      [`POST ${a.route}/retry`]: guarded(async (c) => {
        const id = taskId(c)
        await tasks.retry(a, id)
        return c.json({ taskId: id, status: 'pending' })
      }),
    }),
  )
  return { name: 'task', routes }
}
