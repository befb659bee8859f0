// The runner worker: loads one backend, then answers 'run' messages one at a time. It runs as a
// child process (`node worker-entry.js <title>`, IPC) or as a thread of the API process
// (messages over its port); see transport.ts. Not exported.
import { pathToFileURL } from 'node:url'
import { isMainThread, parentPort } from 'node:worker_threads'
import { errorToWire } from '../../errors/index.js'
import { encodeStrings, fromWire } from '../tensor.js'
import {
  ONNX_RUN,
  type BackendSpec,
  type OnnxRunArgs,
  type OnnxRunResult,
  type ParentMessage,
  type SequenceRunResult,
  type WireTensor,
  type WorkerMessage,
} from './protocol.js'
import { ShmChannel } from './shm.js'
import { sequenceMethods } from '../sequence/worker-methods.js'
import { executeSpans, type ExecuteSpans, flushTracing, startTracing } from '../tracing/index.js'
import { quietOnnxRuntime } from '../../store/ort-env.js'

type Methods = Record<string, (args: unknown) => unknown>

const inThread = !isMainThread && parentPort !== null

const send = (m: WorkerMessage): void => {
  if (!inThread) return void process.send!(m)
  try {
    parentPort!.postMessage(m, transfers(m))
  } catch {
    parentPort!.postMessage(m) // a buffer that cannot move (memory a native library owns) is copied
  }
}

/**
 * A thread's results move to the API thread without a copy: buffers a result owns whole are
 * transferred. (A process's go through the shared-memory file or the IPC socket.)
 */
function transfers(m: WorkerMessage): ArrayBuffer[] {
  if (m.type !== 'result' || typeof m.value !== 'object' || m.value === null) return []
  const out = new Set<ArrayBuffer>()
  // A sequence batch answers its tensors one level down (SequenceRunResult.outputs).
  const value = m.value as Record<string, unknown>
  const tensors = isSequenceResult(value) ? value.outputs : value
  for (const t of Object.values(tensors)) {
    const data = (t as WireTensor | undefined)?.data
    if (
      data instanceof Uint8Array &&
      data.buffer instanceof ArrayBuffer &&
      data.byteOffset === 0 &&
      data.byteLength === data.buffer.byteLength
    )
      out.add(data.buffer)
  }
  return [...out]
}

const isSequenceResult = (v: Record<string, unknown>): v is Record<string, unknown> & SequenceRunResult =>
  Array.isArray(v.missing) && typeof v.outputs === 'object' && v.outputs !== null

async function load(spec: BackendSpec): Promise<Methods> {
  if (spec.kind === 'custom') {
    const url = pathToFileURL(spec.module).href
    // TypeScript modules go through tsx, as `bundle serve` loads services.
    const mod = (
      /\.[cm]?ts$/.test(spec.module)
        ? await (await import('tsx/esm/api')).tsImport(url, import.meta.url)
        : await import(url)
    ) as Record<string, unknown>
    const exported = mod[spec.exportName]
    if (exported === undefined) throw new Error(`${spec.module} has no export named ${spec.exportName}`)
    const instance = (typeof exported === 'function' ? new (exported as new () => object)() : exported) as Record<
      string,
      unknown
    >
    const methods: Methods = {}
    let proto: object | null = instance
    while (proto !== null && proto !== Object.prototype) {
      for (const name of Object.getOwnPropertyNames(proto)) {
        if (name !== 'constructor' && typeof instance[name] === 'function' && !(name in methods))
          methods[name] = (instance[name] as (a: unknown) => unknown).bind(instance)
      }
      proto = Object.getPrototypeOf(proto)
    }
    await (instance as { setup?: () => unknown }).setup?.()
    return methods
  }
  return loadOnnx(spec)
}

/** onnxruntime-node, loaded only in workers: its run() is a blocking native call. */
async function loadOnnx(spec: Extract<BackendSpec, { kind: 'onnx' }>): Promise<Methods> {
  quietOnnxRuntime()
  const ort = await import('onnxruntime-node')
  // onnxruntime writes only what the server's log level keeps (the pool sets it; its lines come
  // back to the server's logger through this worker's stderr, worker-output.ts).
  const severity = Number(process.env.BUNDLE_ORT_LOG_SEVERITY ?? 2)
  ort.env.logLevel = (['verbose', 'info', 'warning', 'error', 'fatal'] as const)[severity] ?? 'warning'
  const providers = spec.executionProviders ?? ['cpu']
  let session: Awaited<ReturnType<typeof ort.InferenceSession.create>>
  try {
    session = await ort.InferenceSession.create(spec.modelPath, {
      executionProviders: providers as never,
      logSeverityLevel: severity as 0 | 1 | 2 | 3 | 4,
      ...(spec.intraOpThreads ? { intraOpNumThreads: spec.intraOpThreads } : {}),
    })
  } catch (err) {
    if (providers.includes('cuda')) {
      // The usual cause: onnxruntime-node was installed without its CUDA binaries.
      throw Object.assign(
        new Error(
          `onnxruntime could not start the CUDA execution provider (${(err as Error).message.split('\n')[0]}); on ` +
            `a machine with CUDA 12, fetch its CUDA binaries with \`ONNXRUNTIME_NODE_INSTALL=cuda12 node ` +
            `node_modules/onnxruntime-node/script/install\``,
        ),
        { code: 'E_RUNNER_GPU_UNAVAILABLE' },
      )
    }
    throw err
  }
  // onnxruntime reads inputs in place, and some of its kernels sum in an order that depends on the
  // data's alignment (a ReduceSum over bytes at offset 8 of a 16-byte boundary differs in the last
  // bit from the same bytes aligned): bytes off a 16-byte boundary (inline IPC bytes may be) are
  // copied to a fresh buffer, as a caller's own typed array would be, so answers equal a direct run.
  const toOrt = (w: WireTensor) => {
    const t = fromWire(w.data.byteOffset % 16 === 0 ? w : { ...w, data: w.data.slice() })
    return new ort.Tensor(t.dtype as never, t.data as never, t.shape)
  }
  const run = async (inputs: Record<string, WireTensor>, outputs?: string[]): Promise<OnnxRunResult> => {
    const feeds = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, toOrt(t)]))
    const result = outputs ? await session.run(feeds, outputs) : await session.run(feeds)
    return Object.fromEntries(
      Object.entries(result).map(([k, t]): [string, WireTensor] => {
        if (t.type === 'string')
          return [
            k,
            { dtype: 'string', shape: [...t.dims], data: encodeStrings(t.data as string[]) } satisfies WireTensor,
          ]
        const view = t.data as ArrayBufferView
        return [
          k,
          {
            dtype: t.type,
            shape: [...t.dims],
            data: new Uint8Array(view.buffer, view.byteOffset, view.byteLength),
          } satisfies WireTensor,
        ]
      }),
    )
  }
  return {
    async [ONNX_RUN](args: unknown): Promise<OnnxRunResult> {
      // A worker gets every tensor whole (gathered ones were written or joined on the way).
      const { inputs, outputs } = args as OnnxRunArgs & { inputs: Record<string, WireTensor> }
      return run(inputs, outputs)
    },
    // A stateful model keeps each sequence's state here, between its frames.
    ...(spec.sequence ? sequenceMethods(spec.sequence, (feeds) => run(feeds)) : {}),
    async metadata() {
      return { inputs: session.inputNames, outputs: session.outputNames }
    },
  }
}

let methods: Methods | undefined
/** The call running now: the next one starts after it. */
let turn: Promise<unknown> = Promise.resolve()
let shm: ShmChannel | undefined
let reuseInputs = false
/** Which worker this is (span attributes). */
let worker = { runner: '', index: 0 }

function onMessage(msg: ParentMessage): void {
  if (msg.type === 'init') {
    // A thread shares the API process's title; only a process of its own is renamed.
    if (!inThread) process.title = `bundle-runner-worker ${msg.runner}#${msg.index}`
    if (msg.shm !== undefined) {
      try {
        shm = ShmChannel.open(msg.shm)
      } catch {
        shm = undefined // 'ready' says so: the API process then sends everything inline
      }
    }
    reuseInputs = msg.backend.kind === 'onnx'
    // Tracing first (the SDK loads on demand): a worker that cannot trace still serves.
    const tracing = msg.tracing
      ? startTracing(msg.tracing, {
          'bundle.process': 'runner-worker',
          'bundle.runner': msg.runner,
          'bundle.worker.index': msg.index,
        }).catch(() => undefined)
      : Promise.resolve()
    worker = { runner: msg.runner, index: msg.index }
    tracing
      .then(() => load(msg.backend))
      .then(
        (m) => {
          methods = m
          send({ type: 'ready', methods: Object.keys(m), shm: shm !== undefined })
        },
        (err: unknown) => send({ type: 'init-error', ...errorToWire(err) }),
      )
  } else if (msg.type === 'run') {
    const fn = methods?.[msg.method]
    if (fn === undefined) {
      send({ type: 'error', id: msg.id, message: `the runner has no method ${msg.method}` })
      return
    }
    let started = 0
    let traced: ExecuteSpans | undefined
    // Calls run one after the other, in arrival order, even when the pool hands over the next
    // before this one is answered (its depth): a method never runs beside itself.
    turn = turn
      // onnxruntime is done with its inputs when run() resolves: they may live in reused memory.
      .then(() => {
        const args = shm ? shm.decode(msg.args, msg.shm, reuseInputs) : msg.args
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
          if (shm === undefined) return send({ type: 'result', id: msg.id, value, ms })
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
