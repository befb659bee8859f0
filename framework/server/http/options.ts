import type { AppOptions } from '../app.js'

export interface ServeOptions extends AppOptions {
  /** Default 3000; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1: only this machine. Containers pass 0.0.0.0. */
  host?: string
  /** How long shutdown waits for in-flight requests. Default 30 000 ms. */
  graceMs?: number
  /**
   * On shutdown, how long to keep accepting connections after readiness drops, answering new
   * requests 503 with `Connection: close` and `Retry-After` while load balancers stop sending
   * (Kubernetes removes an endpoint a moment after the pod is told to stop). Default 0: the
   * listener closes once clients have gone quiet (see shutdown.ts).
   */
  drainDelayMs?: number
  /** A client must send all its headers within this (default 15 000 ms); guards against slowloris. */
  headersTimeoutMs?: number
  /** A client must send its whole request, body included, within this (default 60 000 ms). */
  requestTimeoutMs?: number
  /** An idle keep-alive connection closes after this (default 5 000 ms; Node.js adds 1 s of slack). */
  keepAliveTimeoutMs?: number
  /** A client that accepts no byte of a response for this long is disconnected (default 60 000 ms). */
  sendTimeoutMs?: number
  /** Most open connections; more are closed at once (default: the open-file limit less 256; 0 = no cap). */
  maxConnections?: number
  /** Largest request line plus headers in bytes (default 16 KiB): 431 past it. */
  maxHeaderBytes?: number
  /** Handle SIGTERM/SIGINT (default true): drain, run shutdown hooks, exit 0. */
  handleSignals?: boolean
  /**
   * Send OpenTelemetry traces to this OTLP/HTTP collector (its base URL, e.g.
   * http://localhost:4318). Without it, OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_*
   * variables) decide; with neither, tracing is off. See docs/operations.md "Traces". Tracing
   * is process-wide: the first server of a process to start it sets it up, and its close stops it.
   */
  otelEndpoint?: string
}
