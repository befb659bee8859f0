import type { ServiceDefinition } from '../service/definition.js'

const errorRef = { $ref: '#/components/responses/Error' }

/** An OpenAPI 3.1 document for a service: every API with its request and response schemas. */
export function openapiDocument(def: ServiceDefinition, version = '0.0.0'): Record<string, unknown> {
  const paths: Record<string, unknown> = {}
  for (const a of def.apis) {
    paths[a.route] = {
      post: {
        operationId: a.name,
        summary: a.description ?? a.name,
        tags: ['apis'],
        requestBody: { required: true, content: a.input.openapi() },
        responses: {
          '200': { description: 'success', content: a.output.openapi() },
          '400': errorRef,
          '401': errorRef,
          '413': errorRef,
          '415': errorRef,
          '429': errorRef,
          '500': errorRef,
          '503': errorRef,
          '504': errorRef,
        },
      },
    }
  }
  const probe = (summary: string) => ({ get: { summary, tags: ['infrastructure'], responses: { '200': { description: 'ok' }, '503': { description: 'not ready' } } } })
  paths['/livez'] = probe('the process is up')
  paths['/healthz'] = probe('alias of /livez')
  paths['/readyz'] = probe('start-up finished and every runner is ready')
  paths['/metrics'] = { get: { summary: 'Prometheus metrics', tags: ['infrastructure'], responses: { '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } } } }
  return {
    openapi: '3.1.0',
    info: { title: def.name, version, ...(def.description ? { description: def.description } : {}) },
    paths,
    components: {
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'requestId'],
              properties: { code: { type: 'string' }, message: { type: 'string' }, details: {}, requestId: { type: 'string' } },
            },
          },
        },
      },
      responses: { Error: { description: 'error (see docs/errors.md for codes)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
  }
}
