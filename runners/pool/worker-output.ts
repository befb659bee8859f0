import { BundleError } from '../../errors/index.js'
import type { RunnerLog } from '../runner.js'

// What a worker process writes to stdout or stderr — onnxruntime's own log lines (written by its
// C++ logger, not through Node), a custom runner's console.log — reaches the server's logger as
// records of its own: one JSON line each when logging JSON, never raw text between them.

/** Log levels a worker line can land on, pino's names. */
export type OutputLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'

/** One line of a worker's output, as the server logs it. */
export interface OutputRecord {
  level: OutputLevel
  /** Where it came from: onnxruntime's logger, or the worker's own stdout/stderr. */
  source: 'onnxruntime' | 'stdout' | 'stderr'
  message: string
  /** onnxruntime's `file:line function` that logged it. */
  at?: string
}

// onnxruntime's severities (V, I, W, E, F) as log levels.
const SEVERITY: Record<string, OutputLevel> = { V: 'debug', I: 'info', W: 'warn', E: 'error', F: 'fatal' }

// Terminal colour codes onnxruntime wraps its lines in.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what is matched
const ANSI = /\u001b\[[0-9;]*m/g

// `2026-12-05 18:41:04.073636679 [W:onnxruntime:logid, telemetry.cc:470 Initialize] message`
const ORT_LINE = /^\S+ \S+ \[([VIWEF]):onnxruntime:[^,\]]*,\s*([^\]]*)\]\s?(.*)$/

/** A worker's output line as a log record: onnxruntime's lines at their own severity. */
export function parseOutputLine(raw: string, stream: 'stdout' | 'stderr'): OutputRecord | undefined {
  const line = raw.replace(ANSI, '').trimEnd()
  if (line === '') return undefined
  const m = ORT_LINE.exec(line)
  if (m) return { level: SEVERITY[m[1]!]!, source: 'onnxruntime', message: m[3]!, at: m[2]!.trim() }
  return { level: stream === 'stderr' ? 'warn' : 'info', source: stream, message: line }
}

/** Where a pool sends its workers' output lines. */
export type WorkerOutput = (line: string, stream: 'stdout' | 'stderr', worker: number) => void

/** Logs each worker output line through `log`, tagged with the runner and worker it came from. */
export function logWorkerOutput(log: RunnerLog, runner: string): WorkerOutput {
  return (line, stream, worker) => {
    const r = parseOutputLine(line, stream)
    if (r === undefined) return
    const fields = { runner, worker, source: r.source, ...(r.at ? { at: r.at } : {}) }
    const write = log[r.level] ?? log.warn
    write.call(log, fields, r.message)
  }
}

/** onnxruntime's severities by name, as BUNDLE_ORT_LOG_LEVEL takes them. */
export const ORT_LOG_LEVELS = { verbose: 0, info: 1, warning: 2, error: 3, fatal: 4 } as const

/**
 * onnxruntime's own minimum severity (0 verbose … 4 fatal) for the server's log level (pino's
 * name): lines the server would not log are not even written. `ortLevel` (BUNDLE_ORT_LOG_LEVEL:
 * verbose, info, warning, error, fatal) sets it apart from the server's.
 */
export function ortSeverity(serverLevel: string | undefined, ortLevel?: string): 0 | 1 | 2 | 3 | 4 {
  const named = ortLevel?.trim().toLowerCase()
  if (named !== undefined && named !== '') {
    if (named in ORT_LOG_LEVELS) return ORT_LOG_LEVELS[named as keyof typeof ORT_LOG_LEVELS]
    throw new BundleError(
      'E_SERVE_CONFIG_INVALID',
      `BUNDLE_ORT_LOG_LEVEL must be one of ${Object.keys(ORT_LOG_LEVELS).join(', ')}, got ${JSON.stringify(ortLevel)}`,
    )
  }
  switch (serverLevel) {
    case 'trace':
      return 0
    case 'debug':
      return 1
    case 'error':
      return 3
    case 'fatal':
    case 'silent':
      return 4
    default:
      return 2
  }
}
