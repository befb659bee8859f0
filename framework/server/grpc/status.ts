import { Metadata, status as Status, type ServiceError } from '@grpc/grpc-js'
import type { Logger } from 'pino'
import { RETRYABLE_CODES, type BundleError } from '../../../errors/index.js'
import { refusalReason } from '../../../runners/index.js'
import { clientFacing } from '../error-response.js'

/**
 * The gRPC status of an error, as Triton answers: bad input INVALID_ARGUMENT, an unknown model
 * NOT_FOUND, no or a wrong key UNAUTHENTICATED, a refusal under load or a server not (yet)
 * ready UNAVAILABLE, a deadline that passed or cannot be met DEADLINE_EXCEEDED, a client gone
 * CANCELLED, anything else INTERNAL. A runner refuses for time when the request's own deadline
 * is the binding one (`clientDeadline`): the client asked for less time than the work needs.
 */
export function grpcStatus(e: BundleError, clientDeadline: boolean, original: unknown): Status {
  switch (e.code) {
    case 'E_HTTP_UNAUTHORIZED':
      return Status.UNAUTHENTICATED
    case 'E_HTTP_NOT_FOUND':
    case 'E_MODEL_NOT_FOUND':
      return Status.NOT_FOUND
    case 'E_HTTP_CLIENT_CLOSED':
      return Status.CANCELLED
    case 'E_HTTP_TIMEOUT':
    case 'E_HTTP_REQUEST_TIMEOUT':
      return Status.DEADLINE_EXCEEDED
    case 'E_HTTP_PAYLOAD_TOO_LARGE':
    case 'E_MODEL_OVER_BUDGET':
      return Status.RESOURCE_EXHAUSTED
    case 'E_HTTP_METHOD_NOT_ALLOWED':
      return Status.UNIMPLEMENTED
    case 'E_RUNNER_OVERLOADED': {
      const reason = refusalReason(original)
      return clientDeadline && reason !== undefined && reason !== 'queue_full'
        ? Status.DEADLINE_EXCEEDED
        : Status.UNAVAILABLE
    }
  }
  if (RETRYABLE_CODES.has(e.code) || e.status === 503 || e.status === 502) return Status.UNAVAILABLE
  if (e.status === 504) return Status.DEADLINE_EXCEEDED
  if (e.status === 409) return Status.ALREADY_EXISTS
  if (e.status < 500) return Status.INVALID_ARGUMENT
  return Status.INTERNAL
}

/**
 * An error as a gRPC status with what a client may see of it (clientFacing: no paths or
 * internals), its code in the `error-code` trailer, and `retry-after` on the retryable ones.
 */
export function toServiceError(
  err: unknown,
  requestId: string,
  log: Logger,
  clientDeadline = false,
): Partial<ServiceError> & { code: Status } {
  const e = clientFacing(err, requestId, log)
  const metadata = new Metadata()
  metadata.set('error-code', e.code)
  metadata.set('request-id', requestId)
  if (RETRYABLE_CODES.has(e.code)) metadata.set('retry-after', '1')
  return { code: grpcStatus(e, clientDeadline, err), details: e.message, metadata }
}
