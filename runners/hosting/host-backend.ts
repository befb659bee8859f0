// A model host: the backend of a worker process that holds many onnxruntime sessions at once, so
// that a model costs its session, not a process (runners/hosting/model-host.ts). `open` adds a
// model's methods under `run@id`, `close` releases its session. Not exported.
import type { Backend, BackendContext, BackendMethod } from '../pool/backend.js'
import { onnxMethods, openSession } from '../onnx/backend.js'
import { type HostOpenArgs, type HostOpenResult, hostedMethod } from './protocol.js'

const rss = (): number => process.memoryUsage.rss()

// y = Identity(x), x float [1]: opening and running it once pays onnxruntime's one-time set-up (its
// environment, thread pools, allocators; ~25 MB) before the host reports its base memory, so that
// the first model opened here is measured at its own cost, not with the runtime's.
const TINY_MODEL = 'CAdCBAoAEA06NwoQCgF4EgF5IghJZGVudGl0eRIBZ1oPCgF4EgoKCAgBEgQKAggBYg8KAXkSCgoICAESBAoCCAE='

async function startRuntime(): Promise<void> {
  const ort = await import('onnxruntime-node')
  const session = await ort.InferenceSession.create(Buffer.from(TINY_MODEL, 'base64'), { intraOpNumThreads: 1 })
  await session.run({ x: new ort.Tensor('float32', new Float32Array([1]), [1]) })
  await session.release()
}

export async function load(_options: unknown, _context: BackendContext): Promise<Backend> {
  await startRuntime()
  const sessions = new Map<string, { release: () => Promise<void>; names: string[] }>()
  const methods: Record<string, BackendMethod> = {
    async open(args: unknown): Promise<HostOpenResult> {
      const { id, ...options } = args as HostOpenArgs
      if (sessions.has(id)) throw new Error(`model ${id} is already open in this host`)
      const rssBefore = rss()
      const session = await openSession(options)
      const own = onnxMethods(session)
      const names = Object.keys(own).map((m) => hostedMethod(m, id))
      for (const [m, fn] of Object.entries(own)) methods[hostedMethod(m, id)] = fn
      sessions.set(id, { release: session.release, names })
      return { rssBefore, rssAfter: rss(), inputs: session.inputs, outputs: session.outputs }
    },
    async close(args: unknown): Promise<{ rss: number }> {
      const { id } = args as { id: string }
      const s = sessions.get(id)
      if (s === undefined) return { rss: rss() }
      sessions.delete(id)
      for (const m of s.names) delete methods[m]
      await s.release()
      return { rss: rss() }
    },
    async memory(): Promise<{ rss: number; models: number }> {
      return { rss: rss(), models: sessions.size }
    },
  }
  // onnxruntime has read its inputs when run() resolves: their memory may serve the next call.
  return { methods, releasesInputs: true }
}
