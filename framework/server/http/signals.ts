import type { ServiceApp } from '../app.js'

/**
 * SIGTERM and SIGINT stop the server gracefully, then the process: 0 once stopped, 1 if the
 * shutdown failed. Node as PID 1 in a container has no default SIGTERM handling: without this it
 * never exits. Answers how to take the handlers off (once the server has drained, a second
 * signal gets node's default).
 */
export function exitOnSignals(service: ServiceApp, close: () => Promise<void>): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    service.log.info({ signal }, 'signal received')
    service.log.flush()
    close().then(
      () => process.exit(0),
      (err) => {
        service.log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  const signals = ['SIGTERM', 'SIGINT'] as const
  for (const sig of signals) process.once(sig, onSignal)
  return () => {
    for (const sig of signals) process.off(sig, onSignal)
  }
}
