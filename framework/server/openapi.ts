import type { ApiDefinition, ServiceDefinition } from '../service/definition.js'
import { INFRA_ROUTES } from './infra-routes.js'

const errorRef = { $ref: '#/components/responses/Error' }
const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [String(s), errorRef]))

const taskIdParam = [
  { name: 'taskId', in: 'query', required: true, schema: { type: 'string' }, description: 'the id submit returned' },
]
const taskState = {
  'application/json': {
    schema: {
      type: 'object',
      required: ['taskId', 'status'],
      properties: {
        taskId: { type: 'string' },
        status: { enum: ['pending', 'running', 'success', 'failure', 'cancelled'] },
        createdAt: { type: 'string' },
        startedAt: { type: 'string' },
        finishedAt: { type: 'string' },
        error: { type: 'string' },
      },
    },
  },
}

/** A durable task: submit answers at once; status, result, cancel and retry take its id. */
function taskPaths(a: ApiDefinition): Record<string, unknown> {
  const tags = ['tasks']
  const paths: Record<string, unknown> = {
    [`${a.route}/submit`]: {
      post: {
        operationId: `${a.name}_submit`,
        summary: `${a.description ?? a.name} (submit a task)`,
        tags,
        requestBody: { required: true, content: a.input.openapi() },
        responses: { '202': { description: 'accepted', content: taskState }, ...errors(400, 401, 413, 415, 503) },
      },
    },
    [`${a.route}/status`]: {
      get: {
        operationId: `${a.name}_status`,
        summary: `${a.name}: a task's state`,
        tags,
        parameters: taskIdParam,
        responses: { '200': { description: 'state', content: taskState }, ...errors(404) },
      },
    },
    [`${a.route}/result`]: {
      get: {
        operationId: `${a.name}_result`,
        summary: `${a.name}: a finished task's output`,
        tags,
        parameters: taskIdParam,
        responses: { '200': { description: 'the output', content: a.output.openapi() }, ...errors(404, 409) },
      },
    },
  }
  for (const op of ['cancel', 'retry'])
    paths[`${a.route}/${op}`] = {
      post: {
        operationId: `${a.name}_${op}`,
        summary: `${a.name}: ${op} a task`,
        tags,
        parameters: taskIdParam,
        responses: { '200': { description: 'done', content: taskState }, ...errors(404, 409) },
      },
    }
  return paths
}

/** OpenAPI has no WebSocket operation: a GET that upgrades, with each direction's message schema. */
function websocketPath(a: ApiDefinition): unknown {
  const schemaOf = (d: typeof a.input) => {
    const c = Object.values(d.openapi())[0]
    return c?.itemSchema ?? c?.schema ?? {}
  }
  return {
    get: {
      operationId: a.name,
      summary: a.description ?? a.name,
      description:
        'WebSocket: send one message per input item, receive one per output item. The server closes with ' +
        '1000 when done, or 4000 + the HTTP status of a coded error (sent as a last {"error": …} message). ' +
        'An upgrade refused before the socket opens gets its status and headers (Retry-After) without a body.',
      tags: ['websockets'],
      'x-websocket': { messagesIn: schemaOf(a.input), messagesOut: schemaOf(a.output) },
      responses: { '101': { description: 'switching to the WebSocket protocol' }, ...errors(401, 426, 429, 503) },
    },
  }
}

/** An API's POST. */
function apiPath(a: ApiDefinition): unknown {
  return {
    post: {
      operationId: a.name,
      summary: a.description ?? a.name,
      tags: ['apis'],
      requestBody: { required: true, content: a.input.openapi() },
      responses: {
        '200': { description: 'success', content: a.output.openapi() },
        ...errors(400, 401, 413, 415, 429, 500, 503, 504),
      },
    },
  }
}

/** The operational routes that declare their answers (infra-routes.ts): the probes and /metrics. */
function infraPaths(): Record<string, unknown> {
  const paths: Record<string, unknown> = {}
  for (const r of INFRA_ROUTES) {
    if (r.answers === undefined) continue
    const content = r.contentType ? { content: { [r.contentType]: { schema: { type: 'string' } } } } : {}
    const responses = Object.fromEntries(
      Object.entries(r.answers).map(([status, description]) => [status, { description, ...content }]),
    )
    paths[r.path] = {
      [r.method.toLowerCase()]: {
        summary: r.what,
        tags: ['infrastructure'],
        ...(r.access === 'keyed' ? { security: [{ bearer: [] }] } : {}),
        responses,
      },
    }
  }
  return paths
}

const components = {
  schemas: {
    Error: {
      type: 'object',
      required: ['error'],
      properties: {
        error: {
          type: 'object',
          required: ['code', 'message', 'requestId'],
          properties: {
            code: { type: 'string' },
            message: { type: 'string' },
            details: {},
            requestId: { type: 'string' },
          },
        },
      },
    },
  },
  responses: {
    Error: {
      description: 'error (see docs/errors.md for codes)',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    },
  },
  securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
}

/** An OpenAPI 3.1 document for a service: every API with its request and response schemas. */
export function openapiDocument(def: ServiceDefinition, version = '0.0.0'): Record<string, unknown> {
  const paths: Record<string, unknown> = {}
  for (const a of def.apis) {
    if (a.task) Object.assign(paths, taskPaths(a))
    else paths[a.route] = a.input.kind === 'stream' ? websocketPath(a) : apiPath(a)
  }
  Object.assign(paths, infraPaths())
  return {
    openapi: '3.1.0',
    info: { title: def.name, version, ...(def.description ? { description: def.description } : {}) },
    paths,
    components,
  }
}
