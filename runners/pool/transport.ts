import { fork } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { quietOnnxRuntime } from '../../store/ort-env.js'
import { compiledTwin } from './backend.js'
import type { ParentMessage, WorkerMessage } from './protocol.js'

/**
 * The line to one runner worker, whatever it runs in: a child process (crash isolation: a
 * native crash or a runaway allocation takes only the worker) or a thread of this process (no
 * process wake-up between the batcher and the model, tensors moved rather than copied through a
 * socket — and no isolation). The worker entry speaks the same protocol over both.
 */
export interface Transport {
  /** The worker's process id (a thread's is this process's). */
  readonly pid: number | undefined
  send(m: ParentMessage, transfer?: ArrayBuffer[]): void
  onMessage(listener: (m: WorkerMessage) => void): void
  /** Once, when the worker is gone; `detail` says how ("killed by SIGKILL", "exited with code 1"). */
  onExit(listener: (detail: string) => void): void
  /** Ends it now (a timeout, a failed start). */
  kill(): void
  /** Asks it to exit, ends it after 2 s if it does not; resolves once it is gone. */
  shutDown(): Promise<void>
}

export type Isolation = 'process' | 'thread'

/** Where a worker's stdout and stderr lines go (unset: straight to this process's own). */
export type OutputLines = (line: string, stream: 'stdout' | 'stderr') => void

/** Each line of `stream` to `output`, as it comes. */
function linesOf(stream: Readable | null | undefined, name: 'stdout' | 'stderr', output: OutputLines): void {
  if (!stream) return
  createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => output(line, name))
}

/** A worker's environment: this process's, onnxruntime set up (store/ort-env.ts), and the worker's own. */
function workerEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  quietOnnxRuntime() // threads: onnxruntime reads this process's real environment
  return { ...process.env, ...env }
}

// The compiled worker sits next to this file; from source (tests, tsx) it is the .ts file, or its
// compiled twin in dist/ when the test run says dist/ is current (compiledTwin).
function entry(): { file: string; execArgv: string[] } {
  const js = fileURLToPath(new URL('./worker-entry.js', import.meta.url))
  if (existsSync(js)) return { file: js, execArgv: [] }
  const ts = fileURLToPath(new URL('./worker-entry.ts', import.meta.url))
  const twin = compiledTwin(ts)
  return twin ? { file: twin, execArgv: [] } : { file: ts, execArgv: ['--import', 'tsx'] }
}

const KILL_AFTER_MS = 2_000

/** A worker in a child process, over child_process IPC with the 'advanced' serializer. */
export function processTransport(title: string, env: Record<string, string> = {}, output?: OutputLines): Transport {
  const { file, execArgv } = entry()
  const child = fork(file, [title], {
    execArgv,
    serialization: 'advanced',
    stdio: ['ignore', output ? 'pipe' : 'inherit', output ? 'pipe' : 'inherit', 'ipc'],
    env: workerEnv(env),
  })
  if (output) {
    linesOf(child.stdout, 'stdout', output)
    linesOf(child.stderr, 'stderr', output)
  }
  // IPC to a worker that just died fails with EPIPE; the 'exit' listener does the cleanup.
  child.on('error', () => undefined)
  const gone = () => child.exitCode !== null || child.signalCode !== null
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {
    pid: child.pid,
    // A send that fails means the worker is gone: its exit fails what it held.
    send: (m) => void child.send(m, (err) => err && child.kill('SIGKILL')),
    onMessage: (listener) => void child.on('message', listener),
    onExit: (listener) =>
      void child.once('exit', (code, signal) => listener(signal ? `killed by ${signal}` : `exited with code ${code}`)),
    kill: () => void child.kill('SIGKILL'),
    async shutDown() {
      if (gone()) return
      const kill = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS)
      if (child.connected)
        child.send({ type: 'shutdown' } satisfies ParentMessage, (err) => err && child.kill('SIGKILL'))
      else child.kill('SIGTERM')
      await exited
      clearTimeout(kill)
    },
  }
}

/**
 * A worker in a thread of this process. Messages are structured clones; buffers in `transfer`
 * move without a copy (the pool transfers only buffers it made for the call). terminate() ends
 * a thread between two JavaScript steps: a model inside a native run() ends when that run does.
 */
export function threadTransport(title: string, env: Record<string, string> = {}, output?: OutputLines): Transport {
  const { file, execArgv } = entry()
  // Threads take no --import: from source, a one-line module loads the entry through tsx
  // (resolved from here, not from the working directory).
  const source =
    execArgv.length > 0
      ? `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ tsImport }) => ` +
        `tsImport(${JSON.stringify(pathToFileURL(file).href)}, ` +
        `${JSON.stringify(import.meta.url)}))`
      : undefined
  const worker = new Worker(source ?? file, {
    ...(source ? { eval: true } : {}),
    argv: [title],
    // A thread's JavaScript output can be taken; onnxruntime's native lines go to this process's
    // own stderr (its severity follows the server's log level, and its telemetry is off here too).
    env: workerEnv(env),
    ...(output ? { stdout: true, stderr: true } : {}),
  })
  if (output) {
    linesOf(worker.stdout, 'stdout', output)
    linesOf(worker.stderr, 'stderr', output)
  }
  let done = false
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  let crash: string | undefined
  // An uncaught error in the thread ends it; the exit that follows reports it.
  worker.on('error', (err) => (crash = `failed: ${err.message}`))
  return {
    pid: process.pid,
    send: (m, transfer) => {
      try {
        worker.postMessage(m, transfer ?? [])
      } catch {
        void worker.terminate() // a message that cannot be cloned: the exit fails the call
      }
    },
    onMessage: (listener) => void worker.on('message', listener),
    onExit: (listener) =>
      void worker.once('exit', (code) => {
        done = true
        listener(crash ?? (code === 1 ? 'was terminated' : `exited with code ${code}`))
      }),
    kill: () => void worker.terminate(),
    async shutDown() {
      if (done) return
      const kill = setTimeout(() => void worker.terminate(), KILL_AFTER_MS)
      worker.postMessage({ type: 'shutdown' } satisfies ParentMessage)
      await exited
      clearTimeout(kill)
    },
  }
}

export const transportFor = (isolation: Isolation): typeof processTransport =>
  isolation === 'thread' ? threadTransport : processTransport
