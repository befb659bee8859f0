import pino from 'pino'
import { createServiceApp, type ServiceDefinition } from '../framework/index.js'
import { formatRoutes } from '../framework/routes.js'
import { RedisLink } from '../runners/index.js'

/**
 * `bundle serve --print-routes`: the routes the app mounts for this service and these flags (task
 * routes with --redis, gRPC methods with --grpc-port), printed without serving — the app is made,
 * nothing in it is started (no runner, no socket).
 */
export async function printRoutes(
  definition: ServiceDefinition,
  o: { redisUrl: string | undefined; grpc: boolean },
): Promise<void> {
  const link = o.redisUrl === undefined ? undefined : new RedisLink(o.redisUrl)
  try {
    const { routes } = createServiceApp(definition, {
      logger: pino({ level: 'silent' }),
      ...(link ? { redis: link } : {}),
      ...(o.grpc ? { grpcPort: 0 } : {}),
    })
    process.stdout.write(formatRoutes(routes))
  } finally {
    await link?.close()
  }
}
