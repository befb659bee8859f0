import type { Registry } from 'prom-client'
import { CounterFamily, GaugeFamily } from '../../../runners/index.js'

/** WebSocket series: sessions open, messages each way, and how sessions closed (by close code). */
export interface WsMetrics {
  opened(endpoint: string): void
  ended(endpoint: string): void
  message(endpoint: string, direction: 'in' | 'out'): void
  closed(endpoint: string, code: number): void
}

export function wsMetrics(registry: Registry, service: string, endpoints: readonly string[]): WsMetrics {
  const open = new GaugeFamily('bundle_websocket_sessions_open', 'WebSocket sessions open now, by endpoint', registry)
  const messages = new CounterFamily(
    'bundle_websocket_messages_total',
    'WebSocket messages by endpoint and direction (in: from clients, out: to them)',
    registry,
  )
  const closed = new CounterFamily(
    'bundle_websocket_closed_total',
    'WebSocket sessions ended, by endpoint and close code (1000 done, 1001 server stopping, 1009 message too ' +
      'big, 4000+HTTP status for a coded error, 4499 client gone)',
    registry,
  )
  // Series exist from the first scrape, so rate() works before the first session.
  for (const endpoint of endpoints) {
    open.labels({ service, endpoint })
    for (const direction of ['in', 'out']) messages.labels({ service, endpoint, direction })
  }
  return {
    opened: (endpoint) => void open.labels({ service, endpoint }).value++,
    ended: (endpoint) => void open.labels({ service, endpoint }).value--,
    message: (endpoint, direction) => void messages.labels({ service, endpoint, direction }).value++,
    closed: (endpoint, code) => void closed.labels({ service, endpoint, code: String(code) }).value++,
  }
}
