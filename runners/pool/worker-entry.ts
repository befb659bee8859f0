// The runner worker: loads one backend, then answers 'run' messages one at a time. It runs as a
// child process (`node worker-entry.js <title>`, IPC) or as a thread of the API process
// (messages over its port); see transport.ts. Not exported.
import { isMainThread, parentPort } from 'node:worker_threads'
import { errorToWire, ignore } from '../../errors/index.js'
import { type Backend, type BackendContext, type BackendModule, ownTensors } from './backend.js'
import type { BackendSpec, ParentMessage, WorkerMessage } from './protocol.js'
import { importModule } from './import-module.js'
import { HotWait } from './hot-wait.js'
import { ShmChannel } from './shm.js'
import { executeSpans, type ExecuteSpans, flushTracing, startTracing } from '../tracing/index.js'

const inThread = !isMainThread && parentPort !== null

const send = (m: WorkerMessage, transfer: ArrayBuffer[] = []): void => {
  if (!inThread) return void process.send!(m)
  try {
    parentPort!.postMessage(m, transfer)
  } catch {
    parentPort!.postMessage(m) // a buffer that cannot move (memory a native library owns) is copied
  }
}

/**
 * A thread's results move to the API thread without a copy: buffers a result's tensors own whole
 * are transferred. (A process's go through the shared-memory file or the IPC socket.)
 */
function transfers(value: unknown): ArrayBuffer[] {
  if (!inThread) return []
  const out = new Set<ArrayBuffer>()
  for (const { data } of (backend?.tensorsOf ?? ownTensors)(value)) {
    if (data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength)
      out.add(data.buffer)
  }
  return [...out]
}

/** The backend module named in `spec`, loaded: its `load(options)` answers the methods. */
async function load(spec: BackendSpec, context: BackendContext): Promise<Backend> {
  const mod = (await importModule(spec.module)) as Partial<BackendModule>
  if (typeof mod.load !== 'function')
    throw new Error(`${spec.module} is not a runner backend: it has no exported load(options, context) function`)
  const loaded = await mod.load(spec.options, context)
  if (typeof loaded?.methods !== 'object' || loaded.methods === null)
    throw new Error(`${spec.module}: load() must answer { methods: { name: function } }`)
  return loaded
}

let backend: Backend | undefined
/** The call running now: the next one starts after it. */
let turn: Promise<unknown> = Promise.resolve()
let shm: ShmChannel | undefined
/** Which worker this is (span attributes). */
let worker = { runner: '', index: 0 }
/** Awake from a 'wake' until the call it announced arrives. */
const hot = new HotWait()

function onMessage(msg: ParentMessage): void {
  if (msg.type === 'init') {
    // A thread shares the API process's title; only a process of its own is renamed.
    if (!inThread) process.title = `bundle-runner-worker ${msg.runner}#${msg.index}`
    if (msg.shm !== undefined) {
      try {
        shm = ShmChannel.open(msg.shm, msg.shmMinBytes)
      } catch {
        shm = undefined // 'ready' says so: the API process then sends everything inline
      }
    }
    // Tracing first (the SDK loads on demand): a worker that cannot trace still serves.
    const tracing = msg.tracing
      ? startTracing(msg.tracing, {
          'bundle.process': 'runner-worker',
          'bundle.runner': msg.runner,
          'bundle.worker.index': msg.index,
        }).catch(ignore('a worker that cannot trace still serves'))
      : Promise.resolve()
    worker = { runner: msg.runner, index: msg.index }
    tracing
      .then(() => load(msg.backend, { runner: msg.runner, index: msg.index }))
      .then(
        (b) => {
          backend = b
          send({ type: 'ready', methods: Object.keys(b.methods), shm: shm !== undefined })
        },
        (err: unknown) => send({ type: 'init-error', ...errorToWire(err) }),
      )
  } else if (msg.type === 'wake') {
    hot.hold(msg.ms)
  } else if (msg.type === 'run') {
    hot.release() // the call came: the core is the model's now
    const fn = backend?.methods[msg.method]
    if (fn === undefined) {
      send({ type: 'error', id: msg.id, message: `the runner has no method ${msg.method}` })
      return
    }
    let started = 0
    let traced: ExecuteSpans | undefined
    // Calls run one after the other, in arrival order, even when the pool hands over the next
    // before this one is answered (its depth): a method never runs beside itself.
    turn = turn
      // A backend that releases its inputs when a call resolves lets them live in reused memory.
      .then(() => {
        const args = shm ? shm.decode(msg.args, msg.shm, backend?.releasesInputs === true) : msg.args
        started = performance.now()
        // Each traced request in the call gets an execute span here, a child of its batch span.
        if (msg.trace)
          traced = executeSpans(msg.trace, `execute ${msg.method}`, {
            'bundle.runner': worker.runner,
            'bundle.worker.index': worker.index,
          })
        return fn(args)
      })
      .then(
        (value) => {
          const ms = performance.now() - started
          traced?.end()
          if (shm === undefined) return send({ type: 'result', id: msg.id, value, ms }, transfers(value))
          const out = shm.encode(value, msg.region ?? 0)
          send({ type: 'result', id: msg.id, value: out.value, ms, ...(out.slots.length ? { shm: out.slots } : {}) })
        },
        (err: unknown) => {
          traced?.end(err)
          send({ type: 'error', id: msg.id, ...errorToWire(err) })
        },
      )
  } else if (msg.type === 'shutdown') {
    // Spans still buffered go first (bounded: the pool kills a worker that does not exit).
    void flushTracing().then(() => {
      // In a thread, process.exit ends the thread only.
      if (!inThread) process.disconnect?.()
      process.exit(0)
    })
  }
}

if (inThread) parentPort!.on('message', onMessage)
else {
  process.on('message', onMessage)
  // The parent going away ends the worker: no orphan processes.
  process.on('disconnect', () => process.exit(0))
}
